#include "bootstrap/root.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include "actorcc/error.hpp"
#include "common/log.hpp"

namespace actorcc::bootstrap {

namespace {

using namespace std::chrono;

// A connection must say HELLO this soon after connecting, else it is a stray (port scanner,
// wrong program) and is dropped without disturbing the group.
constexpr milliseconds kHelloTimeout(5000);
// A rejected connection gets this long to read its REJECT and hang up.
constexpr milliseconds kCloseLinger(2000);
// A peer that stops reading must not make the root buffer without bound.
constexpr size_t kMaxOutBuffer = 512u << 20;
// How late the root may log a rank lost after the group formed (see Impl::LossBatch).
constexpr milliseconds kLossGrace(2000);
// Connections that have not authenticated yet (strays, scanners, strangers): beyond this many
// at once the oldest is closed to make room, so strangers cannot exhaust the root's memory or
// fds, and a real rank (which says HELLO right after connecting) still gets in.
constexpr size_t kMaxUnauthenticated = 64;
// No group is larger than this; a HELLO claiming more is refused before anything is sized by it.
constexpr int kMaxWorld = 1 << 16;
// accept() failing for want of descriptors (EMFILE, ENFILE) or memory: stop watching the
// listener this long instead of polling it again at once (which spins at full CPU).
constexpr milliseconds kAcceptBackoff(200);

// Log lines about strangers (rejected tokens, strays, the caps) are limited to a few per window,
// with the count of those held back, so a flood cannot fill the log.
class RateLimitedLog {
 public:
  // True when a line may be written now; `suppressed` receives how many were held back since.
  bool allow(uint64_t& suppressed) {
    auto now = Clock::now();
    if (now - window_start_ >= kWindow) {
      window_start_ = now;
      in_window_ = 0;
    }
    if (in_window_ >= kPerWindow) {
      ++held_;
      return false;
    }
    ++in_window_;
    suppressed = held_;
    held_ = 0;
    return true;
  }

 private:
  static constexpr milliseconds kWindow{10000};
  static constexpr int kPerWindow = 5;
  Clock::time_point window_start_{};
  int in_window_ = 0;
  uint64_t held_ = 0;
};

std::string held_back(uint64_t n) {
  return n ? " (" + std::to_string(n) + " similar lines held back)" : std::string();
}

// Compares tokens in time independent of where they differ.
bool same_token(const wire::Token& a, const wire::Token& b) {
  uint8_t d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<uint8_t>(a[i] ^ b[i]);
  return d == 0;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  return os.str();
}

// The timeout as the user set it: HELLO carries what was left of it when the rank connected
// (999 ms of a 1 s timeout), so round to tenths of a second.
std::string seconds_text(uint64_t ms) {
  if (ms < 100) return std::to_string(ms) + " ms";
  uint64_t tenths = (ms + 50) / 100;
  std::string s = std::to_string(tenths / 10);
  if (tenths % 10) s += "." + std::to_string(tenths % 10);
  return s + " s";
}

Clock::time_point saturating_after(Clock::time_point now, uint64_t ms) {
  auto limit = duration_cast<milliseconds>(Clock::time_point::max() - now).count();
  if (ms >= static_cast<uint64_t>(limit)) return Clock::time_point::max();
  return now + milliseconds(ms);
}

struct Conn {
  enum class State { Open, Closing, Broken, Dead };
  net::Fd fd;
  std::string peer;  // "ip:port"
  wire::FrameDecoder in;
  std::string out;  // bytes not yet accepted by the kernel
  size_t out_pos = 0;
  State state = State::Open;
  std::string broken_detail;
  Clock::time_point hello_by{};  // only before HELLO
  Clock::time_point close_by{};  // only while Closing
  int rank = -1;                 // >= 0 once admitted
  bool write_shut = false;
  Conn() { in.set_max_payload(wire::kMaxHelloPayload); }  // lifted once admitted
};

}  // namespace

struct RootServer::Impl {
  net::Fd listener;
  net::Fd wake_r, wake_w;  // self-pipe: stop() wakes poll()
  wire::Token token;
  int expected_world = 0;  // from the id (from_address path); 0 = fixed by the first HELLO
  std::string where;  // listener address, for log lines
  std::atomic<bool> stop{false};
  std::atomic<bool> admitted_any{false};  // a rank has joined: the root is in use
  RateLimitedLog stranger_log;
  Clock::time_point accept_paused_until{};

  std::list<Conn> conns;  // list: stable addresses for rank_conn
  int world = -1;
  std::string world_fixed_by;
  std::vector<Conn*> rank_conn;      // open connection of each admitted rank
  std::vector<std::string> joined_from;  // "host H pid P at ip:port" per admitted rank
  std::vector<std::string> blobs;
  int joined = 0;
  std::optional<Clock::time_point> join_deadline;
  uint64_t join_timeout_ms = 0;
  bool welcomed = false;
  std::optional<wire::Message> failure;  // set once the group can no longer form
  std::vector<uint64_t> sent;            // allgathers each rank has sent
  std::vector<std::string> gone;         // why a rank is no longer connected ("" = connected)
  std::vector<bool> left;                // left cleanly (BYE) after the group formed
  struct Pending {
    std::vector<std::string> blobs;
    std::vector<bool> have;
    int count = 0;
  };
  std::map<uint64_t, Pending> pending;
  // Ranks lost after the group formed, not yet logged. The peers are told at once (PeerLost);
  // only the root's own log line waits up to kLossGrace: when every rank still connected is
  // lost within it, the processes ended together (ray.shutdown() kills every actor at once),
  // which is the group's end, not a failure, and is logged so, in one line at info level.
  struct LossBatch {
    Clock::time_point first;
    int connected = 0;  // ranks connected just before the first loss
    std::vector<int> ranks;
    std::vector<std::string> reasons;
  };
  std::optional<LossBatch> losses;

  void log_losses(bool ending) {
    if (!losses) return;
    const bool together = static_cast<int>(losses->ranks.size()) == losses->connected;
    if (!together && !ending && Clock::now() - losses->first < kLossGrace) return;
    std::sort(losses->ranks.begin(), losses->ranks.end());
    if (together)
      LOG_INFO("actorcc root " << where << ": " << rank_list(losses->ranks) << " disconnected together (their "
                               << "processes ended at once, as when a job shuts down): the group is over");
    else
      for (const auto& r : losses->reasons) LOG_WARN("actorcc root " << where << ": " << r);
    losses.reset();
  }

  // ---- output ----
  void flush(Conn& c) {
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
  void send(Conn& c, const wire::Message& m) {
    if (c.state != Conn::State::Open) return;
    c.out += wire::encode(m);  // callers keep messages within the frame bound
    if (c.out.size() - c.out_pos > kMaxOutBuffer) {
      mark_broken(c, "stopped reading (output buffer over " + std::to_string(kMaxOutBuffer >> 20) + " MiB)");
      return;
    }
    flush(c);
  }
  void broadcast(const wire::Message& m, const Conn* except = nullptr) {
    for (Conn* c : rank_conn)
      if (c && c != except) send(*c, m);
  }
  void close_after(Conn& c, const wire::Message& m) {
    send(c, m);
    if (c.state != Conn::State::Open) return;
    c.state = Conn::State::Closing;
    c.close_by = Clock::now() + kCloseLinger;
    detach_rank(c);
    flush(c);
  }
  void mark_broken(Conn& c, const std::string& detail) {
    if (c.state == Conn::State::Dead || c.state == Conn::State::Broken) return;
    if (c.state == Conn::State::Closing) {
      c.state = Conn::State::Dead;
      return;
    }
    c.state = Conn::State::Broken;
    c.broken_detail = detail;
  }
  void detach_rank(Conn& c) {
    if (c.rank >= 0 && c.rank < static_cast<int>(rank_conn.size()) && rank_conn[c.rank] == &c) rank_conn[c.rank] = nullptr;
  }

  // ---- group logic ----
  void fail_group(const wire::Message& m) {
    if (failure) return;
    failure = m;
    broadcast(m);
  }

  void on_hello(Conn& c, const wire::Hello& h) {
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

  void on_allgather(Conn& c, const wire::Allgather& a) {
    if (!welcomed || c.rank < 0) {
      mark_broken(c, "sent ALLGATHER before the group formed");
      return;
    }
    if (a.seq != sent[c.rank]) {
      mark_broken(c, "sent allgather #" + std::to_string(a.seq) + " but #" + std::to_string(sent[c.rank]) +
                         " was expected (protocol error)");
      return;
    }
    ++sent[c.rank];
    for (int q = 0; q < world; ++q)
      if (left[q] && sent[q] <= a.seq) {
        send(c, wire::PeerLost{q, "rank " + std::to_string(q) + " closed the communicator"});
        return;
      }
    Pending& p = pending[a.seq];
    if (p.have.empty()) {
      p.blobs.assign(world, {});
      p.have.assign(world, false);
    }
    p.blobs[c.rank] = a.blob;
    p.have[c.rank] = true;
    if (++p.count == world) {
      // Each client keeps its blob within kMaxPayload / world (allgather_limit), so the result
      // fits one frame; a client that did not would make encode() throw, so check here too.
      size_t total = 12;
      for (auto& b : p.blobs) total += 4 + b.size();
      wire::AllgatherResult r{a.seq, std::move(p.blobs)};
      pending.erase(a.seq);
      if (total > wire::kMaxPayload) {
        broadcast(wire::Abort{-1, "allgather #" + std::to_string(a.seq) + ": the blobs total " + std::to_string(total) +
                                      " bytes, above the frame bound of " + std::to_string(wire::kMaxPayload)});
        return;
      }
      broadcast(r);
    }
  }

  void on_status(Conn& c, const wire::Status& s) {
    wire::StatusReply r;
    r.seq = s.seq;
    std::vector<std::string> notes;
    for (int q = 0; q < world; ++q) {
      if (sent[q] > s.seq) continue;
      r.missing.push_back(q);
      if (!gone[q].empty()) notes.push_back("rank " + std::to_string(q) + " " + gone[q]);
    }
    if (r.missing.empty()) {
      r.text = "all ranks have arrived at allgather #" + std::to_string(s.seq);
    } else {
      r.text = rank_list(r.missing) + " of " + std::to_string(world) + (r.missing.size() == 1 ? " has" : " have") +
               " not arrived";
      for (auto& n : notes) r.text += "; " + n;
    }
    send(c, r);
  }

  void on_abort(Conn& c, const wire::Abort& a) {
    if (c.rank < 0) {
      mark_broken(c, "sent ABORT before joining");
      return;
    }
    LOG_WARN("actorcc root " << where << ": rank " << c.rank << " aborts the group: " << a.reason);
    wire::Abort fwd{c.rank, a.reason};  // trust the connection, not the claimed rank
    if (!welcomed && !failure) {
      failure = fwd;
    }
    broadcast(fwd, &c);
  }

  void on_bye(Conn& c) {
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
    // An allgather it has not sent can never complete: tell the ranks already waiting in it.
    fail_unfinishable(leaver);
  }

  // Allgathers that wait for `leaver` (which left cleanly) fail now, naming it; later ones
  // fail as they are called (on_allgather).
  void fail_unfinishable(int leaver) {
    for (auto& [seq, p] : pending)
      if (!p.have.empty() && !p.have[leaver] && p.count > 0) {
        broadcast(wire::PeerLost{leaver, "rank " + std::to_string(leaver) + " closed the communicator"});
        return;
      }
  }

  // A connection ended without BYE (EOF, error, garbage, protocol error).
  void on_lost(Conn& c) {
    std::string detail = c.broken_detail;
    c.state = Conn::State::Dead;
    if (c.rank < 0) {
      uint64_t held = 0;
      if (stranger_log.allow(held))
        LOG_WARN("actorcc root " << where << ": dropped connection from " << c.peer << " before HELLO: " << detail
                                 << held_back(held));
      return;
    }
    detach_rank(c);
    if (failure && !welcomed) return;  // the group never formed; ranks are leaving after JOIN_FAILED
    std::string reason = "rank " + std::to_string(c.rank) + " (" + joined_from[c.rank] + ") " +
                         (detail == "connection closed" ? std::string("disconnected without leaving (process died?)")
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

  void dispatch(Conn& c, wire::Message&& m) {
    if (c.state != Conn::State::Open) return;  // rejected/closing: ignore what it still sends
    if (c.rank < 0 && !std::holds_alternative<wire::Hello>(m)) {
      mark_broken(c, std::string("sent ") + wire::to_string(wire::type_of(m)) + " before HELLO");
      return;
    }
    std::visit(
        [&](auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, wire::Hello>) on_hello(c, x);
          else if constexpr (std::is_same_v<T, wire::Allgather>) on_allgather(c, x);
          else if constexpr (std::is_same_v<T, wire::Status>) on_status(c, x);
          else if constexpr (std::is_same_v<T, wire::Abort>) on_abort(c, x);
          else if constexpr (std::is_same_v<T, wire::Bye>) on_bye(c);
          else mark_broken(c, std::string("sent ") + wire::to_string(wire::type_of(m)) + ", which only the root sends");
        },
        m);
  }

  // ---- I/O events ----
  size_t unauthenticated() const {
    size_t n = 0;
    for (const Conn& c : conns)
      if (c.rank < 0 && c.state != Conn::State::Dead) ++n;
    return n;
  }
  // Closes the longest-waiting unauthenticated connection (conns is in accept order).
  void evict_oldest_stranger() {
    for (Conn& c : conns)
      if (c.rank < 0 && c.state != Conn::State::Dead) {
        uint64_t held = 0;
        if (stranger_log.allow(held))
          LOG_WARN("actorcc root " << where << ": closed the connection from " << c.peer << " (no HELLO yet) to make room: "
                                   << kMaxUnauthenticated << " connections have not said HELLO" << held_back(held));
        c.state = Conn::State::Dead;
        return;
      }
  }

  void accept_all() {
    size_t strangers = unauthenticated();
    for (;;) {
      int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;  // drained
        // Out of descriptors or memory: the pending connection stays queued and the listener
        // stays readable, so back off rather than spin; the stragglers' HELLO timeouts free fds.
        const int e = errno;
        accept_paused_until = Clock::now() + kAcceptBackoff;
        uint64_t held = 0;
        if (stranger_log.allow(held))
          LOG_WARN("actorcc root " << where << ": accept() failed: " << std::strerror(e) << "; retrying in "
                                   << kAcceptBackoff.count() << " ms" << held_back(held));
        return;
      }
      if (strangers >= kMaxUnauthenticated)
        evict_oldest_stranger();  // freed by the next sweep()
      else
        ++strangers;
      Conn& c = conns.emplace_back();
      c.fd.reset(fd);
      net::set_nodelay(fd);
      c.peer = net::peer_name(fd);
      c.hello_by = Clock::now() + kHelloTimeout;
    }
  }

  void read_from(Conn& c) {
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

  void on_timers() {
    log_losses(false);
    auto now = Clock::now();
    for (Conn& c : conns) {
      if (c.state == Conn::State::Open && c.rank < 0 && now >= c.hello_by) mark_broken(c, "sent no HELLO within 5 s");
      if (c.state == Conn::State::Closing && now >= c.close_by) c.state = Conn::State::Dead;
    }
    if (join_deadline && !welcomed && !failure && now >= *join_deadline) {
      std::vector<int> missing;
      for (int q = 0; q < world; ++q)
        if (joined_from[q].empty()) missing.push_back(q);
      std::string msg = rank_list(missing) + " of " + std::to_string(world) + " did not join within " +
                        seconds_text(join_timeout_ms);
      LOG_WARN("actorcc root " << where << ": " << msg);
      fail_group(wire::JoinFailed{msg});
    }
  }

  // Handles broken connections (which may break others through the broadcasts they cause)
  // until none is left, then frees the dead ones.
  void sweep() {
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
      return true;
    });
  }

  bool done() const {
    if (!welcomed && !failure) return false;
    // A group that failed while forming keeps answering latecomers with the reason until its
    // join deadline, rather than leaving them to retry a closed port until theirs.
    if (!welcomed && join_deadline && Clock::now() < *join_deadline) return false;
    for (const Conn& c : conns)
      if (c.rank >= 0) return false;
    return true;
  }

  int poll_timeout() const {
    auto now = Clock::now();
    auto next = now + milliseconds(1000);
    if (accept_paused_until > now) next = std::min(next, accept_paused_until);
    if (join_deadline && !welcomed && *join_deadline > now) next = std::min(next, *join_deadline);
    if (losses) next = std::min(next, losses->first + kLossGrace);
    for (const Conn& c : conns) {
      if (c.state == Conn::State::Open && c.rank < 0) next = std::min(next, c.hello_by);
      if (c.state == Conn::State::Closing) next = std::min(next, c.close_by);
    }
    if (next <= now) return 0;
    return static_cast<int>(duration_cast<milliseconds>(next - now).count()) + 1;
  }

  void run() {
    std::vector<pollfd> pfds;
    std::vector<Conn*> order;
    while (!stop.load(std::memory_order_acquire)) {
      pfds.clear();
      order.clear();
      pfds.push_back({wake_r.get(), POLLIN, 0});
      // fd -1: poll ignores the listener while accepting is paused (see kAcceptBackoff).
      pfds.push_back({Clock::now() < accept_paused_until ? -1 : listener.get(), POLLIN, 0});
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
};

RootServer::RootServer(net::Fd listener, const wire::Token& token, int expected_world)
    : impl_(std::make_unique<Impl>()) {
  impl_->listener = std::move(listener);
  impl_->token = token;
  impl_->expected_world = expected_world;
  impl_->where = net::local_address(impl_->listener.get()).to_string();
  int p[2];
  if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) throw SystemError(std::string("pipe2(): ") + std::strerror(errno));
  impl_->wake_r.reset(p[0]);
  impl_->wake_w.reset(p[1]);
  thread_ = std::thread([this] {
    try {
      impl_->run();
    } catch (const std::exception& e) {
      LOG_ERROR("actorcc root " << impl_->where << ": stopped by an internal error: " << e.what());
    }
    // Close every socket now: the port frees, and clients still connected see the root go.
    impl_->conns.clear();
    impl_->listener.reset();
    finished_.store(true, std::memory_order_release);
  });
}

bool RootServer::in_use() const { return impl_->admitted_any.load(std::memory_order_acquire); }
const wire::Token& RootServer::token() const { return impl_->token; }

void RootServer::stop() {
  impl_->stop.store(true, std::memory_order_release);
  char b = 1;
  ssize_t ignored = ::write(impl_->wake_w.get(), &b, 1);  // full pipe: a wake-up is already pending
  (void)ignored;
}

RootServer::~RootServer() {
  stop();
  if (thread_.joinable()) thread_.join();
}

namespace {

class RootRegistry {
 public:
  static RootRegistry& instance() {
    static RootRegistry r;
    return r;
  }
  void add(std::unique_ptr<RootServer> s) {
    std::vector<std::unique_ptr<RootServer>> reaped;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (forked()) abandon_inherited();
      // Free roots whose groups are over, so a long-lived process does not collect threads.
      for (auto& r : roots_)
        if (r->finished()) reaped.push_back(std::move(r));
      std::erase(roots_, nullptr);
      roots_.push_back(std::move(s));
    }
  }
  // Stops (and joins) the root serving `token` if no rank has joined it; true if one stopped.
  bool stop_unused(const wire::Token& token) {
    std::unique_ptr<RootServer> victim;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (forked()) abandon_inherited();
      for (auto& r : roots_)
        if (r && same_token(r->token(), token) && !r->in_use() && !r->finished()) {
          victim = std::move(r);
          break;
        }
      std::erase(roots_, nullptr);
    }
    return victim != nullptr;  // ~RootServer stops and joins, outside the lock
  }
  ~RootRegistry() {
    std::lock_guard<std::mutex> g(mu_);
    if (forked()) abandon_inherited();
    for (auto& r : roots_) r->stop();
    roots_.clear();  // joins
  }

 private:
  // A child forked after a root started (a launcher that creates the id, then forks ranks)
  // inherits these objects but not their threads: stopping or joining them there would write
  // to the parent's wake pipe and join a thread that does not exist. Leak them instead.
  bool forked() const { return ::getpid() != owner_; }
  void abandon_inherited() {
    for (auto& r : roots_) (void)r.release();
    roots_.clear();
    owner_ = ::getpid();
  }

  std::mutex mu_;
  std::vector<std::unique_ptr<RootServer>> roots_;
  pid_t owner_ = ::getpid();
};

}  // namespace

void launch_root(net::Fd listener, const wire::Token& token, int expected_world) {
  RootRegistry::instance().add(std::make_unique<RootServer>(std::move(listener), token, expected_world));
}

bool stop_root_if_unused(const wire::Token& token) { return RootRegistry::instance().stop_unused(token); }

}  // namespace actorcc::bootstrap
