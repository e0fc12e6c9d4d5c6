#include "bootstrap/stranger_gate.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/log.hpp"
#include "common/text.hpp"

namespace actorcc::net {

void StrangerGate::accept_all(int listener, size_t unauthenticated, const std::function<void(Fd)>& admit,
                              const std::function<void()>& evict_oldest) {
  for (;;) {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;  // drained
      // Out of descriptors or memory: the pending connection stays queued and the listener
      // stays readable, so back off rather than spin; the strangers' timeouts free fds.
      const int e = errno;
      paused_until_ = Clock::now() + kAcceptBackoff;
      log(cat("accept() failed: ", std::strerror(e), "; retrying in ", kAcceptBackoff.count(), " ms"));
      return;
    }
    if (unauthenticated >= kMaxUnauthenticated)
      evict_oldest();
    else
      ++unauthenticated;
    set_nodelay(fd);
    admit(Fd(fd));
  }
}

void StrangerGate::log(const std::string& line) {
  static constexpr std::chrono::milliseconds kWindow{10000};
  static constexpr int kPerWindow = 5;
  const auto now = Clock::now();
  if (now - window_start_ >= kWindow) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= kPerWindow) {
    ++held_;
    return;
  }
  ++in_window_;
  const uint64_t held = held_;
  held_ = 0;
  LOG_WARN(where_ << ": " << line << (held ? cat(" (", held, " similar lines held back)") : std::string()));
}

}  // namespace actorcc::net
