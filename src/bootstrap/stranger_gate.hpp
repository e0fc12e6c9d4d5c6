// StrangerGate: the protections of a listening socket that anyone who reaches the port can
// connect to, shared by the bootstrap root and the TCP transport's data-port listener between
// nodes: a cap on connections that have not proved who they are (beyond it the oldest is
// dropped, so strangers cannot exhaust memory or descriptors and a real peer, which
// authenticates right after connecting, still gets in), a back-off instead of a spin when
// accept() runs out of descriptors or memory, and a limit on the log lines strangers cause.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "bootstrap/socket.hpp"
#include "common/deadline.hpp"

namespace actorcc::net {

class StrangerGate {
 public:
  // Connections that have not authenticated yet, at most, before the oldest is dropped.
  static constexpr size_t kMaxUnauthenticated = 64;
  // accept() failing for want of descriptors (EMFILE, ENFILE) or memory: stop watching the
  // listener this long instead of polling it again at once (which spins at full CPU).
  static constexpr std::chrono::milliseconds kAcceptBackoff{200};

  // `where`: how log lines name the listener ("actorcc root 10.0.0.1:29500").
  explicit StrangerGate(std::string where) : where_(std::move(where)) {}

  // The descriptor to poll for the listener: -1 while accepting is paused.
  int poll_fd(int listener) const { return Clock::now() < paused_until_ ? -1 : listener; }
  // When a paused listener is to be watched again (a time in the past when it is not paused).
  Clock::time_point resumes_at() const { return paused_until_; }

  // Accepts every connection pending on the non-blocking `listener`, handing each to
  // `admit` (non-blocking, close-on-exec). `unauthenticated` is how many are held now; at the
  // cap `evict_oldest` must drop one (the caller knows its connections) before the new one is
  // admitted. Out of descriptors or memory: pauses (see poll_fd) and logs, limited.
  void accept_all(int listener, size_t unauthenticated, const std::function<void(Fd)>& admit,
                  const std::function<void()>& evict_oldest);

  // Writes a WARN line about a stranger, at most 5 per 10 s, the next one saying how many
  // were held back.
  void log(const std::string& line);

 private:
  std::string where_;
  Clock::time_point paused_until_{};
  Clock::time_point window_start_{};
  int in_window_ = 0;
  uint64_t held_ = 0;
};

}  // namespace actorcc::net
