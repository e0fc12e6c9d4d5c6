// The root's work for a formed group: the small all-gathers, status replies naming the ranks
// not arrived, aborts forwarded, clean leaves (BYE) and ranks lost without one.
#include "bootstrap/root_state.hpp"

#include <algorithm>
#include <string>
#include <variant>

#include "actorcc/error.hpp"
#include "common/log.hpp"
#include "common/text.hpp"

namespace actorcc::bootstrap {

using namespace std::chrono;
using namespace root_detail;

void RootServer::Impl::on_allgather(Conn& c, const wire::Allgather& a) {
  if (!welcomed || c.rank < 0) {
    mark_broken(c, "sent ALLGATHER before the group formed");
    return;
  }
  if (a.seq != sent[c.rank]) {
    mark_broken(c, cat("sent allgather #", a.seq, " but #", sent[c.rank], " was expected (protocol error)"));
    return;
  }
  if (overrun) {
    send(c, *overrun);
    return;
  }
  // A group poisoned after it formed (a rank claimed twice) completes nothing more: every rank
  // was told, and a rank that has not read it yet must not get a result instead.
  if (failure) {
    send(c, *failure);
    return;
  }
  if (held[c.rank] + a.blob.size() > kMaxHeldPerRank || held_total + a.blob.size() > kMaxHeldTotal) {
    refuse_overrun(c, a);
    return;
  }
  ++sent[c.rank];
  for (int q = 0; q < world; ++q)
    if (left[q] && sent[q] <= a.seq) {
      send(c, wire::PeerLost{q, cat("rank ", q, " closed the communicator")});
      return;
    }
  Pending& p = pending[a.seq];
  if (p.have.empty()) {
    p.blobs.assign(world, {});
    p.have.assign(world, false);
  }
  p.blobs[c.rank] = a.blob;
  p.have[c.rank] = true;
  held[c.rank] += a.blob.size();
  held_total += a.blob.size();
  if (++p.count == world) {
    for (int q = 0; q < world; ++q) {
      held[q] -= p.blobs[q].size();
      held_total -= p.blobs[q].size();
    }
    // Each client keeps its blob within kMaxPayload / world (allgather_limit), so the result
    // fits one frame; a client that did not would make encode() throw, so check here too.
    size_t total = 12;
    for (auto& b : p.blobs) total += 4 + b.size();
    wire::AllgatherResult r{a.seq, std::move(p.blobs)};
    pending.erase(a.seq);
    if (total > wire::kMaxPayload) {
      broadcast(wire::Abort{-1, cat("allgather #", a.seq, ": the blobs total ", total, " bytes, above the frame bound of ",
                                    wire::kMaxPayload)});
      return;
    }
    broadcast(r);
  }
}

void RootServer::Impl::refuse_overrun(Conn& c, const wire::Allgather& a) {
  const int r = c.rank;
  std::vector<int> behind;
  for (int q = 0; q < world; ++q)
    if (sent[q] <= a.seq && q != r) behind.push_back(q);
  const bool mine = held[r] + a.blob.size() > kMaxHeldPerRank;
  std::string why = cat("rank ", r, " was refused: its allgather #", a.seq, " (", a.blob.size(),
                        " bytes) would make the root hold ",
                        mine ? cat(held[r] + a.blob.size(), " bytes of its blobs")
                             : cat(held_total + a.blob.size(), " bytes of blobs in all"),
                        " for allgathers not yet reached by ",
                        behind.empty() ? std::string("the other ranks") : rank_list(behind), ", above the bound of ",
                        (mine ? kMaxHeldPerRank : kMaxHeldTotal) >> 20,
                        " MiB (a rank running ahead of the group, or not an actorcc rank)");
  LOG_WARN("actorcc root " << where << ": " << why);
  gone[r] = "was refused for running ahead";
  overrun = wire::PeerLost{r, why};
  release_pending();
  broadcast(*overrun, &c);
  close_after(c, *overrun);
}

void RootServer::Impl::release_pending() {
  pending.clear();
  std::fill(held.begin(), held.end(), 0);
  held_total = 0;
}

void RootServer::Impl::on_status(Conn& c, const wire::Status& s) {
  wire::StatusReply r;
  r.seq = s.seq;
  std::vector<std::string> notes;
  for (int q = 0; q < world; ++q) {
    if (sent[q] > s.seq) continue;
    r.missing.push_back(q);
    if (!gone[q].empty()) notes.push_back(cat("rank ", q, " ", gone[q]));
  }
  if (r.missing.empty()) {
    r.text = cat("all ranks have arrived at allgather #", s.seq);
  } else {
    r.text = cat(rank_list(r.missing), " of ", world, r.missing.size() == 1 ? " has" : " have", " not arrived");
    for (auto& n : notes) r.text += "; " + n;
  }
  send(c, r);
}

void RootServer::Impl::on_abort(Conn& c, const wire::Abort& a) {
  if (c.rank < 0) {
    mark_broken(c, "sent ABORT before joining");
    return;
  }
  LOG_WARN("actorcc root " << where << ": rank " << c.rank << " aborts the group: " << a.reason);
  // Trust the connection for who aborts, not the claimed rank; the culprit is the aborter's
  // finding (whom it waited for), kept when it names a rank of the group.
  wire::Abort fwd{c.rank, a.reason, a.culprit >= 0 && a.culprit < world ? a.culprit : c.rank};
  if (!welcomed && !failure) {
    failure = fwd;
  }
  broadcast(fwd, &c);
}

void RootServer::Impl::on_bye(Conn& c, const wire::Bye& b) {
  if (c.rank < 0) {
    c.state = Conn::State::Dead;
    return;
  }
  if (!welcomed) {  // leaving before the group formed breaks the join for everyone
    mark_broken(c, "left before the group formed");
    return;
  }
  gone[c.rank] = "closed the communicator";
  left[c.rank] = true;
  const int leaver = c.rank;
  detach_rank(c);
  c.state = Conn::State::Dead;  // nothing more to say to it
  // Everyone still here learns of it at once: a GPU kernel or a later call that waits for the
  // leaver must fail now, naming it, not at its timeout. The count says which calls those are.
  broadcast(wire::PeerLeft{leaver, b.collectives});
  // An allgather it has not sent can never complete: tell the ranks already waiting in it.
  fail_unfinishable(leaver);
}

void RootServer::Impl::fail_unfinishable(int leaver) {
  for (auto& [seq, p] : pending)
    if (!p.have.empty() && !p.have[leaver] && p.count > 0) {
      broadcast(wire::PeerLost{leaver, cat("rank ", leaver, " closed the communicator")});
      return;
    }
}

void RootServer::Impl::on_lost(Conn& c) {
  std::string detail = c.broken_detail;
  c.state = Conn::State::Dead;
  if (c.rank < 0) {
    gate.log("dropped connection from " + c.peer + " before HELLO: " + detail);
    return;
  }
  detach_rank(c);
  if (failure && !welcomed) return;  // the group never formed; ranks are leaving after JOIN_FAILED
  std::string reason = cat("rank ", c.rank, " (", joined_from[c.rank], ") ",
                           detail == "connection closed" ? std::string("disconnected without leaving (process died?)")
                                                         : "was lost: " + detail);
  gone[c.rank] = "disconnected";
  wire::PeerLost m{c.rank, reason};
  if (!welcomed) {
    LOG_WARN("actorcc root " << where << ": " << reason);
    fail_group(m);
    return;
  }
  if (!losses) {
    int connected = 1;  // c itself, already detached
    for (const Conn* q : rank_conn) connected += q != nullptr;
    losses = LossBatch{Clock::now(), connected, {}, {}};
  }
  losses->ranks.push_back(c.rank);
  losses->reasons.push_back(reason);
  broadcast(m);
  log_losses(false);
}

void RootServer::Impl::log_losses(bool ending) {
  if (!losses) return;
  const bool together = static_cast<int>(losses->ranks.size()) == losses->connected;
  const bool in_grace = Clock::now() - losses->first < kLossGrace;
  if (!together && !ending && in_grace) return;
  std::sort(losses->ranks.begin(), losses->ranks.end());
  // Stopped by its own process within the grace: that process is ending with the ranks' (the
  // driver that made the id exits right after ray.shutdown(), whose kills reach the actors one
  // by one), so the losses so far are the same shutdown's, not failures. A root that ends
  // because every other rank left keeps the warnings: then the lost ranks did fail.
  const bool with_root = ending && in_grace && stop.load(std::memory_order_acquire);
  if (together)
    LOG_INFO("actorcc root " << where << ": " << rank_list(losses->ranks) << " disconnected together (their "
                             << "processes ended at once, as when a job shuts down): the group is over");
  else if (with_root)
    LOG_INFO("actorcc root " << where << ": " << rank_list(losses->ranks) << " disconnected as the process of "
                             << "this root ended (as when a job shuts down): the group is over");
  else
    for (const auto& r : losses->reasons) LOG_WARN("actorcc root " << where << ": " << r);
  losses.reset();
}

void RootServer::Impl::dispatch(Conn& c, wire::Message&& m) {
  if (c.state != Conn::State::Open) return;  // rejected/closing: ignore what it still sends
  if (c.rank < 0 && !std::holds_alternative<wire::Hello>(m) && !std::holds_alternative<wire::Refuse>(m)) {
    mark_broken(c, std::string("sent ") + wire::to_string(wire::type_of(m)) + " before HELLO");
    return;
  }
  std::visit(
      [&](auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, wire::Hello>) on_hello(c, x);
        else if constexpr (std::is_same_v<T, wire::Refuse>) {
          if (c.rank < 0) on_refuse(c, x);
          else mark_broken(c, "sent REFUSE after joining");
        }
        else if constexpr (std::is_same_v<T, wire::Allgather>) on_allgather(c, x);
        else if constexpr (std::is_same_v<T, wire::Status>) on_status(c, x);
        else if constexpr (std::is_same_v<T, wire::Abort>) on_abort(c, x);
        else if constexpr (std::is_same_v<T, wire::Bye>) on_bye(c, x);
        else mark_broken(c, std::string("sent ") + wire::to_string(wire::type_of(m)) + ", which only the root sends");
      },
      m);
}

}  // namespace actorcc::bootstrap
