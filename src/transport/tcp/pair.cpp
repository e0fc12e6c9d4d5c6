#include "transport/tcp/pair.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "actorcc/error.hpp"
#include "transport/tcp/frame.hpp"

namespace actorcc::tcp {

Pair::Pair(net::Fd fd, int self, int peer, std::string peer_address)
    : fd_(std::move(fd)), self_(self), peer_(peer), address_(std::move(peer_address)) {}

void Pair::send(const void* data, size_t n, uint64_t tag, Deadline deadline, const AbortSignal* abort,
                const CallDesc& call) {
  exchange(this, data, n, nullptr, nullptr, 0, tag, deadline, abort, call);
}

void Pair::recv(void* data, size_t n, uint64_t tag, Deadline deadline, const AbortSignal* abort, const CallDesc& call) {
  exchange(nullptr, nullptr, 0, this, data, n, tag, deadline, abort, call);
}

// A batch's messages as resumable byte counters over header + payload. Each (pair,
// direction) is a queue: only its first unfinished message moves, so messages on one pair
// and direction keep their order on the stream.
class Transfers {
 public:
  explicit Transfers(const std::vector<Transfer>& xs) : xs_(xs), st_(xs.size()) {
    for (size_t i = 0; i < xs_.size(); ++i) {
      const Transfer& x = xs_[i];
      if (!x.pair->broken_.empty()) rethrow_broken(*x.pair);
      st_[i].hdr = encode(FrameHeader{x.tag, x.bytes, x.call});
      queue(x.pair, x.send).push_back(i);
    }
  }

  void run(Deadline deadline, const AbortSignal* abort) {
    abort_ = abort;
    auto start = Clock::now();
    std::vector<pollfd> fds;
    for (;;) {
      if (abort && abort->raised()) abort->rethrow();
      bool open = false;
      fds.clear();
      for (auto& [key, q] : queues_) {
        Pair* const pair = key.first;  // plain names: lambdas may not capture structured bindings (clang)
        const bool send = key.second;
        while (q.head < q.items.size() && progress(q.items[q.head])) ++q.head;
        if (q.head == q.items.size()) continue;
        open = true;
        const short ev = send ? POLLOUT : POLLIN;
        auto it = std::find_if(fds.begin(), fds.end(), [&](const pollfd& f) { return f.fd == pair->fd(); });
        if (it == fds.end()) fds.push_back({pair->fd(), ev, 0});
        else it->events |= ev;
      }
      if (!open) return;
      // Wake at least every 50 ms to see the abort word even when the peer is silent.
      int wait_ms = static_cast<int>(std::min<int64_t>(deadline.remaining().count(), 50));
      int r = ::poll(fds.data(), fds.size(), wait_ms);
      if (r < 0 && errno != EINTR) fail(*first_open()->pair, ErrorCode::System, std::string("poll: ") + std::strerror(errno));
      if (r == 0 && deadline.expired()) timeout(start);
    }
  }

 private:
  static constexpr uint64_t kHdr = kFrameHeaderBytes;
  static constexpr auto kAbortGrace = std::chrono::milliseconds(250);
  struct State {
    std::array<uint8_t, kFrameHeaderBytes> hdr{};  // ours to send, or the peer's as read
    size_t done = 0;                               // bytes of header + payload moved
  };
  struct Queue {
    std::vector<size_t> items;
    size_t head = 0;
  };

  std::vector<size_t>& queue(Pair* p, bool send) { return queues_[{p, send}].items; }
  bool finished(size_t i) const { return st_[i].done == kHdr + xs_[i].bytes; }

  // Moves what the socket takes (a send) or gives (a recv) now: the header, then the payload,
  // in as many pieces as the socket allows. True when message `i` is complete, false when the
  // socket would block; a received header is checked before a byte of its payload is read.
  bool progress(size_t i) {
    const Transfer& x = xs_[i];
    State& s = st_[i];
    auto* data = static_cast<uint8_t*>(x.data);  // only read when sending
    while (!finished(i)) {
      uint8_t* p = s.done < kHdr ? s.hdr.data() + s.done : data + (s.done - kHdr);
      size_t n = s.done < kHdr ? kHdr - s.done : x.bytes - (s.done - kHdr);
      // MSG_NOSIGNAL: a vanished peer gives EPIPE here rather than SIGPIPE to the process.
      ssize_t k = x.send ? ::send(x.pair->fd(), p, n, MSG_NOSIGNAL) : ::recv(x.pair->fd(), p, n, 0);
      if (k > 0) {
        bool header_now = !x.send && s.done < kHdr && s.done + static_cast<size_t>(k) == kHdr;
        s.done += static_cast<size_t>(k);
        if (header_now) check_header(i);
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
      lost(*x.pair, x.send ? "sending" : "receiving", k < 0 ? std::strerror(errno) : "connection closed");
    }
    return true;
  }

  // The header is checked before a payload byte is read: the posted buffer bounds the
  // message, and a mismatch is named instead of being read into the wrong place.
  void check_header(size_t i) {
    const Transfer& x = xs_[i];
    Pair& p = *x.pair;
    auto h = decode_frame_header(st_[i].hdr.data());
    if (!h) fail(p, ErrorCode::Remote, "garbled stream from rank " + std::to_string(p.peer()) + " (bad frame header)");
    if (h->call != x.call || h->tag != x.tag || h->length != x.bytes) {
      const std::string me = std::to_string(p.self()), them = std::to_string(p.peer());
      try {
        if (h->call != x.call)
          fail(p, ErrorCode::InvalidArgument,
               "rank " + me + ": mismatched collectives: rank " + them + " called " + call_text(h->call) + ", rank " +
                   me + " called " + call_text(x.call) + " (found in a TCP frame from rank " + them + ")");
        fail(p, ErrorCode::InvalidArgument,
             "rank " + them + " sent a message of " + std::to_string(h->length) + " bytes (tag " +
                 std::to_string(h->tag) + ") where " + std::to_string(x.bytes) + " bytes (tag " + std::to_string(x.tag) +
                 ") were expected: the ranks called different collectives or sizes");
      } catch (const InvalidArgument& e) {
        throw FrameMismatch(e.what(), p.self(), p.peer(), h->tag, h->length);
      }
    }
  }

  // A point-to-point message belongs to no collective call.
  static std::string call_text(const CallDesc& d) { return d.valid ? d.text() : "a point-to-point transfer"; }

  [[noreturn]] void lost(Pair& p, const char* doing, const std::string& why) {
    const std::string what = "TCP connection with rank " + std::to_string(p.peer()) + " (" + p.peer_address() +
                             ") lost while " + doing + ": " + why + " (the rank died, left, or its node is unreachable)";
    // A rank that leaves after the group failed closes its connections, and a rank that dies
    // is named by the bootstrap root: either way the group's abort, with the real cause, is
    // on its way. Give it a moment, so the lost connection is not mistaken for the cause.
    if (abort_ && abort_->wait_until(Deadline(Clock::now() + kAbortGrace))) {
      p.broken_ = "rank " + std::to_string(p.self()) + ": " + what;
      p.broken_code_ = static_cast<int>(ErrorCode::Remote);
      abort_->rethrow();
    }
    fail(p, ErrorCode::Remote, what);
  }

  const Transfer* first_open() const {
    for (size_t i = 0; i < xs_.size(); ++i)
      if (!finished(i)) return &xs_[i];
    return &xs_.front();
  }

  [[noreturn]] void timeout(Clock::time_point start) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    std::string who;
    const Transfer* blame = nullptr;
    for (const auto& [key, q] : queues_) {
      if (q.head == q.items.size()) continue;
      const size_t i = q.items[q.head];
      const Transfer& x = xs_[i];
      const size_t left = kHdr + x.bytes - st_[i].done;
      // The peers not heard from come first: they are the likelier culprits.
      if (!blame || (!x.send && blame->send)) blame = &x;
      who += std::string(who.empty() ? "" : " and ") + "rank " + std::to_string(x.pair->peer()) + " (" +
             x.pair->peer_address() + ") to " + (x.send ? "take " : "send ") + std::to_string(left) + " more bytes";
    }
    fail(*blame->pair, ErrorCode::Timeout,
         "timed out after " + std::to_string(ms) + " ms waiting for " + who + " (tag " + std::to_string(blame->tag) + ")");
  }

  [[noreturn]] static void fail(Pair& p, ErrorCode code, const std::string& what) {
    p.broken_ = what;
    p.broken_code_ = static_cast<int>(code);
    rethrow_broken(p);
  }

  [[noreturn]] static void rethrow_broken(const Pair& p) {
    switch (static_cast<ErrorCode>(p.broken_code_)) {
      case ErrorCode::Timeout: throw TimeoutError(p.broken_, p.self(), p.peer());
      case ErrorCode::InvalidArgument: throw InvalidArgument(p.broken_, p.self(), p.peer());
      case ErrorCode::System: throw SystemError(p.broken_, p.self());
      default: throw RemoteError(p.broken_, p.peer(), p.self());
    }
  }

  const std::vector<Transfer>& xs_;
  std::vector<State> st_;
  std::map<std::pair<Pair*, bool>, Queue> queues_;
  const AbortSignal* abort_ = nullptr;
};

void transfer(const std::vector<Transfer>& xs, Deadline deadline, const AbortSignal* abort) {
  if (xs.empty()) return;
  Transfers t(xs);
  t.run(deadline, abort);
}

void exchange(Pair* to, const void* send_data, size_t send_n, Pair* from, void* recv_data, size_t recv_n, uint64_t tag,
              Deadline deadline, const AbortSignal* abort, const CallDesc& call) {
  std::vector<Transfer> xs;
  if (to) xs.push_back({to, true, const_cast<void*>(send_data), send_n, tag, call});
  if (from) xs.push_back({from, false, recv_data, recv_n, tag, call});
  transfer(xs, deadline, abort);
}

}  // namespace actorcc::tcp
