// The root's admission of a rank: a HELLO is checked (token first, then protocol version, world
// size and rank) before anything is sized by it; a rank with the right token that is rejected
// while the group forms fails the group at once, naming it.
#include "bootstrap/root_state.hpp"

#include <string>

#include "actorcc/error.hpp"
#include "common/log.hpp"

namespace actorcc::bootstrap {

using namespace std::chrono;
using namespace root_detail;

void RootServer::Impl::fail_group(const wire::Message& m) {
  if (failure) return;
  failure = m;
  broadcast(m);
}

void RootServer::Impl::on_hello(Conn& c, const wire::Hello& h) {
  const std::string who = "rank " + std::to_string(h.rank) + " from " + c.peer;
  if (c.rank >= 0) {
    mark_broken(c, "sent a second HELLO");
    return;
  }
  if (!same_token(h.token, token)) {
    uint64_t held = 0;
    if (stranger_log.allow(held))
      LOG_WARN("actorcc root " << where << ": rejected a join from " << c.peer
                               << ": wrong token (a stale UniqueId, one from another group, or a stranger)"
                               << held_back(held));
    close_after(c, wire::Reject{"wrong token: this UniqueId does not belong to the group served by the root at " +
                                where + " (stale or from another group?)"});
    return;
  }
  // A rank with the right token is one the group is waiting for: when it is rejected while the
  // group forms, the others are told at once (they would otherwise wait out the join
  // deadline without learning why), and so is anyone who joins later.
  auto reject = [&](const std::string& reason) {
    LOG_WARN("actorcc root " << where << ": rejected " << who << ": " << reason);
    close_after(c, wire::Reject{reason});
    if (world >= 0 && !welcomed)
      fail_group(wire::PeerLost{h.rank, "rank " + std::to_string(h.rank) + " was rejected: " + reason});
  };
  if (h.protocol_version != wire::kProtocolVersion) {
    reject(who + " speaks bootstrap protocol version " + std::to_string(h.protocol_version) +
           " but the root speaks " + std::to_string(wire::kProtocolVersion) + " (mixed actorcc versions?)");
    return;
  }
  if (failure) {  // too late: tell it why the group is gone
    close_after(c, *failure);
    return;
  }
  if (h.world <= 0 || h.world > kMaxWorld) {
    reject(who + ": world size " + std::to_string(h.world) + " is not in 1.." + std::to_string(kMaxWorld));
    return;
  }
  if (expected_world > 0 && h.world != expected_world) {
    reject(who + " says world size " + std::to_string(h.world) + " but the group's id was made for world size " +
           std::to_string(expected_world));
    return;
  }
  if (h.rank < 0 || h.rank >= h.world) {
    reject("rank " + std::to_string(h.rank) + " is out of range for world size " + std::to_string(h.world) +
           " (from " + c.peer + ")");
    return;
  }
  if (world >= 0 && h.world != world) {
    reject(who + " says world size " + std::to_string(h.world) + " but the group has world size " +
           std::to_string(world) + " (set by " + world_fixed_by + ")");
    return;
  }
  if (world >= 0 && !joined_from[h.rank].empty()) {
    reject("rank " + std::to_string(h.rank) + " already joined from " + joined_from[h.rank] +
           "; a second join for it came from " + c.peer + " (pid " + std::to_string(h.pid) + ")");
    return;
  }
  if (world < 0) {
    world = h.world;
    world_fixed_by = who;
    rank_conn.assign(world, nullptr);
    joined_from.assign(world, {});
    blobs.assign(world, {});
    sent.assign(world, 0);
    gone.assign(world, {});
    left.assign(world, false);
    held.assign(world, 0);
  }
  c.rank = h.rank;
  c.in.set_max_payload(wire::kMaxPayload);
  admitted_any.store(true, std::memory_order_release);
  rank_conn[h.rank] = &c;
  joined_from[h.rank] = "host " + (h.host.empty() ? std::string("?") : h.host) + " pid " + std::to_string(h.pid) +
                        " at " + c.peer;
  blobs[h.rank] = h.blob;
  ++joined;
  // The root cannot know the callers' join timeout, so each HELLO carries it and the
  // earliest deadline among the joined ranks governs.
  auto dl = saturating_after(Clock::now(), h.join_timeout_ms);
  if (!join_deadline || dl < *join_deadline) {
    join_deadline = dl;
    join_timeout_ms = h.join_timeout_ms;
  }
  LOG_DEBUG("actorcc root " << where << ": rank " << h.rank << " of " << world << " joined from "
                            << joined_from[h.rank]);
  if (joined == world) {
    welcomed = true;
    wire::Welcome w{std::move(blobs)};
    blobs.clear();
    broadcast(w);
  }
}

}  // namespace actorcc::bootstrap
