// The root's admission of a rank: a HELLO is checked (token first, then protocol version, world
// size and rank) before anything is sized by it; a rank with the right token that is rejected
// while the group forms fails the group at once, naming it.
#include "bootstrap/root_state.hpp"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "actorcc/error.hpp"
#include "common/log.hpp"
#include "common/text.hpp"

namespace actorcc::bootstrap {

using namespace std::chrono;
using namespace root_detail;

void RootServer::Impl::fail_group(const wire::Message& m) {
  if (failure) return;
  failure = m;
  broadcast(m);
}

void RootServer::Impl::on_hello(Conn& c, const wire::Hello& h) {
  const std::string who = cat("rank ", h.rank, " from ", c.peer);
  if (c.rank >= 0) {
    mark_broken(c, "sent a second HELLO");
    return;
  }
  if (!hello_verifies(h, token, c.nonce)) {
    gate.log("rejected a join from " + c.peer +
             ": wrong token (a stale UniqueId, one from another group, a replayed HELLO, or a stranger)");
    close_after(c, wire::Reject{"wrong token: this UniqueId does not belong to the group served by the root at " +
                                where + " (stale or from another group?)"});
    return;
  }
  // From here on the HELLO is authenticated: its host, pid and run id are the sender's own.
  const std::string claimant = cat("host ", h.host.empty() ? std::string("?") : h.host, " pid ", h.pid, " at ", c.peer);
  // A rank with the right token is one the group is waiting for: when it is rejected while the
  // group forms, the others are told at once (they would otherwise wait out the join
  // deadline without learning why), and so is anyone who joins later. `poison`: the group fails
  // even after it formed (a rank claimed twice).
  auto reject = [&](const std::string& reason, bool poison = false) {
    LOG_WARN("actorcc root " << where << ": rejected " << who << ": " << reason);
    close_after(c, wire::Reject{reason});
    if ((world >= 0 && !welcomed) || poison)
      fail_group(wire::PeerLost{h.rank, cat("rank ", h.rank, " was rejected: ", reason)});
  };
  if (h.protocol_version != wire::kProtocolVersion) {
    reject(cat(who, " speaks bootstrap protocol version ", h.protocol_version, " but the root speaks ",
               wire::kProtocolVersion, " (mixed actorcc versions?)"));
    return;
  }
  // Another launch's rank (same address, same token: no secret, or one shared by both): refused
  // before it is a claim on this group, which goes on undisturbed.
  if (run_id && h.run_id != run_id->value) {
    const RunId theirs{h.run_id, h.run_id_from};
    const std::string why = cat("rank ", h.rank, " (", claimant, ") belongs to ", describe(theirs), ", but the group at ",
                                where, " is ", describe(*run_id), ", its rank 0's: ",
                                "another launch uses this address (give each launch its own port), or the ranks ",
                                "of one launch disagree (set ACTORCC_RUN_ID to one value on every rank)");
    gate.log("refused a join: " + why);
    close_after(c, wire::Reject{why});
    return;
  }
  if (failure) {  // too late: tell it why the group is gone
    close_after(c, *failure);
    return;
  }
  if (h.flags & wire::kHelloSecondRoot) {
    on_second_root(c, h);
    return;
  }
  if (h.world <= 0 || h.world > kMaxWorld) {
    reject(cat(who, ": world size ", h.world, " is not in 1..", kMaxWorld));
    return;
  }
  if (expected_world > 0 && h.world != expected_world) {
    reject(cat(who, " says world size ", h.world, " but the group's id was made for world size ", expected_world));
    return;
  }
  if (h.rank < 0 || h.rank >= h.world) {
    reject(cat("rank ", h.rank, " is out of range for world size ", h.world, " (from ", c.peer, ")"));
    return;
  }
  if (world >= 0 && h.world != world) {
    c.disputed = true;
    c.hello_by = Clock::time_point::max();
    disputed.push_back({&c, h});
    if (!dispute_until) dispute_until = Clock::now() + kDisputeWait;
    settle_world(false);
    return;
  }
  // Two processes hold the token and claim one rank: two launches share the address (and the
  // secret, or have none), or a launcher started a rank twice. Which one belongs here cannot be
  // known, so the group is poisoned whenever it comes, formed or not: no rank may go on with
  // data that could come from another launch's process.
  if (world >= 0 && !joined_from[h.rank].empty()) {
    reject(cat("rank ", h.rank, " already joined from ", joined_from[h.rank], "; a second join for it came from ",
               claimant, ": rank ", h.rank, " is claimed twice (two launches on the address ", where,
               "? give each its own port, or set ACTORCC_RUN_ID), so the group is poisoned"),
           true);
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
    next_join_note = Clock::now() + kJoinNoteFirst;
  }
  c.rank = h.rank;
  c.in.set_max_payload(wire::kMaxPayload);
  admitted_any.store(true, std::memory_order_release);
  rank_conn[h.rank] = &c;
  joined_from[h.rank] = claimant;
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
  if (!disputed.empty()) settle_world(false);
  welcome_if_complete();
}

void RootServer::Impl::welcome_if_complete() {
  if (welcomed || failure || world <= 0 || joined != world || Clock::now() < welcome_not_before) return;
  if (log::level() >= log::Level::Debug) {
    // The thread's figures first: their span then lies within the time they are set against.
    const std::string cpu = thread_cpu_since(serving_cpu);
    const double ms = duration<double, std::milli>(Clock::now() - serving_since).count();
    LOG_DEBUG("actorcc root " << where << ": all " << world << " ranks joined: WELCOME, " << ms
                              << " ms after it began serving" << cpu);
  }
  welcomed = true;
  wire::Welcome w{std::move(blobs)};
  blobs.clear();
  broadcast(w);
}

void RootServer::Impl::on_second_root(Conn& c, const wire::Hello& h) {
  // This root runs in the process of the rank 0 that started it (the from_address path).
  const std::string mine = joined_from.size() > 0 && !joined_from[0].empty()
                               ? joined_from[0]
                               : cat("this root's own process (host ", self_host, " pid ", ::getpid(), ")");
  const std::string why = cat("two roots for ", where, ": rank 0 of this group (", mine, ") hosts it, and another ",
                              "rank 0 (host ", h.host.empty() ? std::string("?") : h.host, " pid ", h.pid,
                              ") could not listen there: two launches share the address ",
                              "(give each its own port, or set ACTORCC_RUN_ID), and ranks of either may have joined ",
                              "this group, so it is poisoned");
  LOG_WARN("actorcc root " << where << ": " << why);
  close_after(c, wire::Reject{why});
  // Nobody may have joined yet: keep answering latecomers with the reason until the other
  // rank 0's join deadline, as for any group that failed while forming.
  if (!join_deadline) join_deadline = saturating_after(Clock::now(), h.join_timeout_ms);
  fail_group(wire::PeerLost{0, why});
}

void RootServer::Impl::on_refuse(Conn& c, const wire::Refuse& r) {
  const wire::Hello& h = r.hello;
  if (c.rank >= 0) {
    mark_broken(c, "sent a REFUSE after its HELLO");
    return;
  }
  // Authenticated as a HELLO is: signed for this connection's challenge.
  if (!hello_verifies(h, token, c.nonce)) {
    gate.log("ignored a refusal to join from " + c.peer + ": wrong token");
    close_after(c, wire::Reject{"wrong token: this UniqueId does not belong to the group served by the root at " +
                                where});
    return;
  }
  // The group's size as the root knows it (-1: nobody has fixed it yet). A claim it cannot hold
  // (a rank out of range, another world size, a rank already taken) names the joiner by what it
  // claimed, and blames no rank of the group.
  const int group_world = world >= 0 ? world : expected_world > 0 ? expected_world : -1;
  const int size = group_world >= 0 ? group_world : h.world;
  const bool holds = h.rank >= 0 && h.rank < size && h.world == size &&
                     (world < 0 || joined_from[h.rank].empty());
  const std::string from = cat("(host ", h.host.empty() ? std::string("?") : h.host, " pid ", h.pid, " at ", c.peer, ")");
  const std::string msg = cat(holds ? cat("rank ", h.rank, " ", from)
                                    : cat("a joiner claiming rank ", h.rank, " of world ", h.world, " ", from),
                              " refused to join: ", r.reason);
  if (welcomed || failure) {  // the group formed without it, or already failed: nothing to add
    LOG_WARN("actorcc root " << where << ": " << msg << " (the group " << (welcomed ? "formed" : "failed")
                             << " already)");
    close_after(c, failure ? *failure : wire::Message(wire::Reject{"the group at " + where + " formed already"}));
    return;
  }
  LOG_WARN("actorcc root " << where << ": " << msg);
  // Ranks that come later learn it too, until the refuser's own join deadline.
  if (!join_deadline) {
    join_deadline = saturating_after(Clock::now(), h.join_timeout_ms);
    join_timeout_ms = h.join_timeout_ms;
  }
  wire::PeerLost m{holds ? h.rank : -1, msg};
  fail_group(m);
  close_after(c, m);  // the answer: the refusal is in (the joiner waits for it before closing)
}

}  // namespace actorcc::bootstrap

namespace actorcc::bootstrap {

void RootServer::Impl::settle_world(bool expired) {
  if (disputed.empty() || failure) return;
  // Claims per size: the admitted ranks all gave `world`.
  std::map<int, std::vector<int>> claims;
  for (int q = 0; q < world; ++q)
    if (!joined_from[q].empty()) claims[world].push_back(q);
  for (const auto& d : disputed) claims[d.hello.world].push_back(d.hello.rank);
  int best = world;
  bool tie = false;
  for (const auto& [w, ranks] : claims) {
    if (w == best) continue;
    if (ranks.size() > claims[best].size()) {
      best = w;
      tie = false;
    } else if (ranks.size() == claims[best].size()) {
      tie = true;
    }
  }
  // One against one (or any tie) waits for another claim, up to kDisputeWait; then the size that
  // the ranks which came could form (as many distinct ranks as it says) wins, else the group's.
  if (tie) {
    if (!expired) return;
    std::set<int> came;
    for (const auto& [w, ranks] : claims) came.insert(ranks.begin(), ranks.end());
    best = claims.count(static_cast<int>(came.size())) ? static_cast<int>(came.size()) : world;
  }
  std::vector<int> wrong;
  std::string text;
  for (const auto& [w, ranks] : claims) {
    if (w != best) wrong.insert(wrong.end(), ranks.begin(), ranks.end());
    text += cat(text.empty() ? "" : ", ", rank_list(ranks), " gave world size ", w);
  }
  std::sort(wrong.begin(), wrong.end());
  const std::string msg = cat(rank_list(wrong), " gave a world size other than ",
                              tie ? "the one the ranks that came could form (" : "the most ranks' (", best, "): ", text);
  LOG_WARN("actorcc root " << where << ": " << msg);
  wire::PeerLost m{wrong.front(), msg};
  fail_group(m);  // the admitted ranks
  // Held ranks: one that gave the wrong size is rejected (its join raises InvalidArgument with
  // the reason); one that gave the right size learns who is at fault, as the admitted ones do.
  for (auto& d : disputed) {
    if (d.hello.world != best) close_after(*d.conn, wire::Reject{msg});
    else close_after(*d.conn, m);
  }
  disputed.clear();
  dispute_until.reset();
}

}  // namespace actorcc::bootstrap
