#include "transport/tcp/pair.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "actorcc/error.hpp"
#include "transport/tcp/frame.hpp"

namespace actorcc::tcp {

Pair::Pair(net::Fd fd, int self, int peer, std::string peer_address)
    : fd_(std::move(fd)), self_(self), peer_(peer), address_(std::move(peer_address)) {}

void Pair::send(const void* data, size_t n, uint64_t tag, Deadline deadline, const AbortSignal* abort) {
  exchange(this, data, n, nullptr, nullptr, 0, tag, deadline, abort);
}

void Pair::recv(void* data, size_t n, uint64_t tag, Deadline deadline, const AbortSignal* abort) {
  exchange(nullptr, nullptr, 0, this, data, n, tag, deadline, abort);
}

// One exchange's two directions as resumable byte counters over header + payload.
class Exchange {
 public:
  Exchange(Pair* to, const void* sd, size_t sn, Pair* from, void* rd, size_t rn, uint64_t tag)
      : to_(to), from_(from), sdata_(static_cast<const uint8_t*>(sd)), rdata_(static_cast<uint8_t*>(rd)),
        sn_(sn), rn_(rn), tag_(tag), shdr_(encode(FrameHeader{tag, sn})) {
    for (Pair* p : {to_, from_})
      if (p && !p->broken_.empty()) rethrow_broken(*p);
    sent_ = to_ ? 0 : kFrameHeaderBytes + sn_;
    got_ = from_ ? 0 : kFrameHeaderBytes + rn_;
  }

  void run(Deadline deadline, const AbortSignal* abort) {
    auto start = Clock::now();
    for (;;) {
      if (abort && abort->raised()) abort->rethrow();
      progress_send();
      progress_recv();
      if (send_done() && recv_done()) return;
      pollfd fds[2];
      int nfds = 0;
      if (!send_done()) fds[nfds++] = {to_->fd(), POLLOUT, 0};
      if (!recv_done()) {
        if (nfds == 1 && fds[0].fd == from_->fd())
          fds[0].events |= POLLIN;
        else
          fds[nfds++] = {from_->fd(), POLLIN, 0};
      }
      // Wake at least every 50 ms to see the abort word even when the peer is silent.
      int wait_ms = static_cast<int>(std::min<int64_t>(deadline.remaining().count(), 50));
      int r = ::poll(fds, nfds, wait_ms);
      if (r < 0 && errno != EINTR) fail(send_done() ? *from_ : *to_, ErrorCode::System, std::string("poll: ") + std::strerror(errno));
      if (r == 0 && deadline.expired()) timeout(start);
    }
  }

 private:
  static constexpr uint64_t kHdr = kFrameHeaderBytes;

  bool send_done() const { return sent_ == kHdr + sn_; }
  bool recv_done() const { return got_ == kHdr + rn_; }

  void progress_send() {
    while (!send_done()) {
      const uint8_t* p = sent_ < kHdr ? shdr_.data() + sent_ : sdata_ + (sent_ - kHdr);
      size_t n = sent_ < kHdr ? kHdr - sent_ : sn_ - (sent_ - kHdr);
      // MSG_NOSIGNAL: a vanished peer gives EPIPE here rather than SIGPIPE to the process.
      ssize_t k = ::send(to_->fd(), p, n, MSG_NOSIGNAL);
      if (k > 0) {
        sent_ += static_cast<size_t>(k);
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      lost(*to_, "sending", k < 0 ? std::strerror(errno) : "connection closed");
    }
  }

  void progress_recv() {
    while (!recv_done()) {
      uint8_t* p = got_ < kHdr ? rhdr_ + got_ : rdata_ + (got_ - kHdr);
      size_t n = got_ < kHdr ? kHdr - got_ : rn_ - (got_ - kHdr);
      ssize_t k = ::recv(from_->fd(), p, n, 0);
      if (k > 0) {
        bool header_now = got_ < kHdr && got_ + static_cast<size_t>(k) == kHdr;
        got_ += static_cast<size_t>(k);
        if (header_now) check_header();
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      lost(*from_, "receiving", k < 0 ? std::strerror(errno) : "connection closed");
    }
  }

  // The header is checked before a payload byte is read: the posted buffer bounds the
  // message, and a mismatch is named instead of being read into the wrong place.
  void check_header() {
    auto h = decode_frame_header(rhdr_);
    if (!h) fail(*from_, ErrorCode::Remote, "garbled stream from rank " + std::to_string(from_->peer()) + " (bad frame header)");
    if (h->tag != tag_ || h->length != rn_)
      fail(*from_, ErrorCode::InvalidArgument,
           "rank " + std::to_string(from_->peer()) + " sent a message of " + std::to_string(h->length) + " bytes (tag " +
               std::to_string(h->tag) + ") where " + std::to_string(rn_) + " bytes (tag " + std::to_string(tag_) +
               ") were expected: the ranks called different collectives or sizes");
  }

  [[noreturn]] void lost(Pair& p, const char* doing, const std::string& why) {
    fail(p, ErrorCode::Remote,
         "TCP connection with rank " + std::to_string(p.peer()) + " (" + p.peer_address() + ") lost while " + doing + ": " +
             why + " (the rank died, left, or its node is unreachable)");
  }

  [[noreturn]] void timeout(Clock::time_point start) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    std::string who;
    if (!recv_done())
      who = "rank " + std::to_string(from_->peer()) + " (" + from_->peer_address() + ") to send " +
            std::to_string(kHdr + rn_ - got_) + " more bytes";
    if (!send_done())
      who += std::string(who.empty() ? "" : " and ") + "rank " + std::to_string(to_->peer()) + " (" + to_->peer_address() +
             ") to take " + std::to_string(kHdr + sn_ - sent_) + " more bytes";
    Pair& p = recv_done() ? *to_ : *from_;
    fail(p, ErrorCode::Timeout, "timed out after " + std::to_string(ms) + " ms waiting for " + who + " (tag " + std::to_string(tag_) + ")");
  }

  [[noreturn]] static void fail(Pair& p, ErrorCode code, const std::string& what) {
    p.broken_ = what;
    p.broken_code_ = static_cast<int>(code);
    rethrow_broken(p);
  }

  [[noreturn]] static void rethrow_broken(const Pair& p) {
    switch (static_cast<ErrorCode>(p.broken_code_)) {
      case ErrorCode::Timeout: throw TimeoutError(p.broken_, p.self());
      case ErrorCode::InvalidArgument: throw InvalidArgument(p.broken_, p.self());
      case ErrorCode::System: throw SystemError(p.broken_, p.self());
      default: throw RemoteError(p.broken_, p.peer(), p.self());
    }
  }

  Pair* to_;
  Pair* from_;
  const uint8_t* sdata_;
  uint8_t* rdata_;
  size_t sn_, rn_;
  uint64_t tag_;
  std::array<uint8_t, kFrameHeaderBytes> shdr_;
  uint8_t rhdr_[kFrameHeaderBytes] = {};
  size_t sent_ = 0, got_ = 0;
};

void exchange(Pair* to, const void* send_data, size_t send_n, Pair* from, void* recv_data, size_t recv_n, uint64_t tag,
              Deadline deadline, const AbortSignal* abort) {
  Exchange x(to, send_data, send_n, from, recv_data, recv_n, tag);
  x.run(deadline, abort);
}

}  // namespace actorcc::tcp
