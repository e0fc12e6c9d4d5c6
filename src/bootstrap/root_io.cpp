// The root's poll() loop: non-blocking output with a bound per peer, accepting (with a cap on
// connections that have not said HELLO and a back-off when descriptors run out), reading frames,
// the HELLO / linger / join deadlines, and freeing connections that are done.
#include "bootstrap/root_state.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "actorcc/error.hpp"
#include "common/log.hpp"
#include "common/text.hpp"

namespace actorcc::bootstrap {

using namespace std::chrono;
using namespace root_detail;

void RootServer::Impl::flush(Conn& c) {
  while (c.out_pos < c.out.size()) {
    ssize_t k = ::send(c.fd.get(), c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      c.out_pos += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    mark_broken(c, k < 0 ? std::strerror(errno) : "send returned 0");
    return;
  }
  if (c.out_pos == c.out.size()) {
    c.out.clear();
    c.out_pos = 0;
    // A rejected connection: half-close after the REJECT so the peer reads it before EOF.
    if (c.state == Conn::State::Closing && !c.write_shut) {
      ::shutdown(c.fd.get(), SHUT_WR);
      c.write_shut = true;
    }
  }
}

void RootServer::Impl::send(Conn& c, const wire::Message& m) {
  if (c.state != Conn::State::Open) return;
  c.out += wire::encode(m);  // callers keep messages within the frame bound
  if (c.out.size() - c.out_pos > kMaxOutBuffer) {
    mark_broken(c, cat("stopped reading (output buffer over ", kMaxOutBuffer >> 20, " MiB)"));
    return;
  }
  flush(c);
}

void RootServer::Impl::broadcast(const wire::Message& m, const Conn* except) {
  for (Conn* c : rank_conn)
    if (c && c != except) send(*c, m);
}

void RootServer::Impl::close_after(Conn& c, const wire::Message& m) {
  send(c, m);
  if (c.state != Conn::State::Open) return;
  c.state = Conn::State::Closing;
  c.close_by = Clock::now() + kCloseLinger;
  detach_rank(c);
  flush(c);
}

void RootServer::Impl::mark_broken(Conn& c, const std::string& detail) {
  if (c.state == Conn::State::Dead || c.state == Conn::State::Broken) return;
  if (c.state == Conn::State::Closing) {
    c.state = Conn::State::Dead;
    return;
  }
  c.state = Conn::State::Broken;
  c.broken_detail = detail;
}

void RootServer::Impl::detach_rank(Conn& c) {
  if (c.rank >= 0 && c.rank < static_cast<int>(rank_conn.size()) && rank_conn[c.rank] == &c) rank_conn[c.rank] = nullptr;
}

size_t RootServer::Impl::unauthenticated() const {
  size_t n = 0;
  for (const Conn& c : conns)
    if (c.rank < 0 && !c.disputed && c.state != Conn::State::Dead) ++n;
  return n;
}

void RootServer::Impl::evict_oldest_stranger() {
  for (Conn& c : conns)
    if (c.rank < 0 && !c.disputed && c.state != Conn::State::Dead) {
      gate.log(cat("closed the connection from ", c.peer, " (no HELLO yet) to make room: ",
                   net::StrangerGate::kMaxUnauthenticated, " connections have not said HELLO"));
      c.state = Conn::State::Dead;
      return;
    }
}

void RootServer::Impl::accept_all() {
  gate.accept_all(
      listener.get(), unauthenticated(),
      [&](net::Fd fd) {
        Conn& c = conns.emplace_back();
        c.peer = net::peer_name(fd.get());
        LOG_DEBUG("actorcc root " << where << ": accepted a connection from " << c.peer);
        c.fd = std::move(fd);
        c.hello_by = Clock::now() + kHelloTimeout;
        // At once: a joiner waits for it (a few seconds on the from_address path) to tell an
        // actorcc root from another program holding the port.
        c.nonce = challenges.next();
        send(c, wire::Challenge{c.nonce});
      },
      [&] { evict_oldest_stranger(); });  // freed by the next sweep()
}

void RootServer::Impl::read_from(Conn& c) {
  char buf[64 * 1024];
  for (;;) {
    ssize_t k = ::recv(c.fd.get(), buf, sizeof(buf), 0);
    if (k > 0) {
      if (c.state != Conn::State::Open) continue;  // draining a closing connection
      c.in.feed(buf, static_cast<size_t>(k));
      try {
        while (c.state == Conn::State::Open) {
          auto m = c.in.next();
          if (!m) break;
          dispatch(c, std::move(*m));
        }
      } catch (const wire::WireError& e) {
        mark_broken(c, std::string("sent a malformed frame: ") + e.what());
      }
      if (c.state != Conn::State::Open && c.state != Conn::State::Closing) return;
      continue;
    }
    if (k == 0) {
      if (c.state == Conn::State::Closing) c.state = Conn::State::Dead;
      mark_broken(c, "connection closed");
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    mark_broken(c, std::strerror(errno));
    return;
  }
}

void RootServer::Impl::on_timers() {
  log_losses(false);
  auto now = Clock::now();
  // One pass: a connection marked broken here lingers (close_by is in the future), so the
  // order of the two checks does not matter.
  for (Conn& c : conns) {
    if (c.state == Conn::State::Open && c.rank < 0 && now >= c.hello_by) mark_broken(c, "sent no HELLO within 5 s");
    else if (c.state == Conn::State::Closing && now >= c.close_by) c.state = Conn::State::Dead;
  }
  if (dispute_until && now >= *dispute_until) settle_world(true);
  welcome_if_complete();
  if (world > 0 && !welcomed && !failure && now >= next_join_note) note_missing_joiners(now);
  if (join_deadline && !welcomed && !failure && now >= *join_deadline) {
    std::vector<int> missing;
    for (int q = 0; q < world; ++q)
      if (joined_from[q].empty()) missing.push_back(q);
    std::string msg = cat(rank_list(missing), " of ", world, " did not join within ", seconds_text(join_timeout_ms));
    LOG_WARN("actorcc root " << where << ": " << msg);
    fail_group(wire::JoinFailed{msg, missing.empty() ? -1 : missing.front()});
  }
}

void RootServer::Impl::note_missing_joiners(Clock::time_point now) {
  next_join_note = now + kJoinNoteEvery;
  wire::StatusReply r;
  r.seq = wire::kJoinStatusSeq;
  for (int q = 0; q < world; ++q)
    if (joined_from[q].empty()) r.missing.push_back(q);
  if (r.missing.empty()) return;
  const auto left = join_deadline ? duration_cast<seconds>(*join_deadline - now).count() : 0;
  r.text = cat("still waiting for ", rank_list(std::vector<int>(r.missing.begin(), r.missing.end())), " of ", world,
               " to join (", joined, " joined; ",
               join_deadline && *join_deadline != Clock::time_point::max() ? cat(left, " s left of the join timeout")
                                                                           : std::string("no join timeout"),
               ")");
  LOG_WARN("actorcc root " << where << ": " << r.text);
  broadcast(r);
}

void RootServer::Impl::sweep() {
  for (bool again = true; again;) {
    again = false;
    for (Conn& c : conns)
      if (c.state == Conn::State::Broken) {
        on_lost(c);
        again = true;
      }
  }
  conns.remove_if([&](Conn& c) {
    if (c.state != Conn::State::Dead) return false;
    detach_rank(c);
    if (c.disputed) std::erase_if(disputed, [&](const Disputed& d) { return d.conn == &c; });
    return true;
  });
  if (disputed.empty()) dispute_until.reset();
}

bool RootServer::Impl::done() const {
  if (!welcomed && !failure) return false;
  // A group that failed while forming keeps answering latecomers with the reason until its
  // join deadline, rather than leaving them to retry a closed port until theirs.
  if (!welcomed && join_deadline && Clock::now() < *join_deadline) return false;
  for (const Conn& c : conns)
    if (c.rank >= 0) return false;
  return true;
}

int RootServer::Impl::poll_timeout() const {
  auto now = Clock::now();
  auto next = now + milliseconds(1000);
  if (gate.resumes_at() > now) next = std::min(next, gate.resumes_at());
  if (join_deadline && !welcomed && *join_deadline > now) next = std::min(next, *join_deadline);
  if (dispute_until) next = std::min(next, *dispute_until);
  if (world > 0 && joined == world && !welcomed && !failure) next = std::min(next, welcome_not_before);
  if (world > 0 && !welcomed && !failure) next = std::min(next, next_join_note);
  if (losses) next = std::min(next, losses->first + kLossGrace);
  for (const Conn& c : conns) {
    if (c.state == Conn::State::Open && c.rank < 0) next = std::min(next, c.hello_by);
    if (c.state == Conn::State::Closing) next = std::min(next, c.close_by);
  }
  if (next <= now) return 0;
  return static_cast<int>(duration_cast<milliseconds>(next - now).count()) + 1;
}

void RootServer::Impl::run() {
  if (log::level() >= log::Level::Debug) {
    serving_since = Clock::now();
    serving_cpu = thread_cpu();
  }
  LOG_DEBUG("actorcc root " << where << ": serving");
  std::vector<pollfd> pfds;
  std::vector<Conn*> order;
  while (!stop.load(std::memory_order_acquire)) {
    pfds.clear();
    order.clear();
    pfds.push_back({wake_r.get(), POLLIN, 0});
    // fd -1: poll ignores the listener while accepting is paused (StrangerGate::kAcceptBackoff).
    pfds.push_back({gate.poll_fd(listener.get()), POLLIN, 0});
    for (Conn& c : conns) {
      short ev = POLLIN;
      if (c.out_pos < c.out.size()) ev |= POLLOUT;
      pfds.push_back({c.fd.get(), ev, 0});
      order.push_back(&c);
    }
    int r = ::poll(pfds.data(), pfds.size(), poll_timeout());
    if (r < 0 && errno != EINTR) {
      LOG_ERROR("actorcc root " << where << ": poll failed: " << std::strerror(errno) << "; root stops");
      return;
    }
    if (stop.load(std::memory_order_acquire)) break;
    if (r > 0) {
      if (pfds[1].revents & POLLIN) accept_all();
      for (size_t i = 0; i < order.size(); ++i) {
        short rev = pfds[i + 2].revents;
        Conn& c = *order[i];
        if (rev & POLLOUT) flush(c);
        if (rev & (POLLIN | POLLHUP | POLLERR)) read_from(c);
      }
    }
    on_timers();
    sweep();
    if (done()) break;
  }
  log_losses(true);
}

}  // namespace actorcc::bootstrap
