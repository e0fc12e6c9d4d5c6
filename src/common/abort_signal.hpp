// AbortSignal: the one place a rank learns that the group is broken (a peer died, aborted,
// or timed out). Every wait loop polls raised(); transports subscribe with on_raise() to set
// their own abort words (shared memory, host-mapped memory read by GPU kernels).
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "actorcc/error.hpp"
#include "common/deadline.hpp"

namespace actorcc {

class AbortSignal {
 public:
  explicit AbortSignal(int self_rank = -1) : self_(self_rank) {}

  // First call wins; later calls are ignored. `culprit` is the rank at fault (-1: the root).
  void raise(int culprit, ErrorCode code, const std::string& reason);
  bool raised() const noexcept { return raised_.load(std::memory_order_acquire); }
  int culprit() const;
  std::string reason() const;
  // Throws the error this signal holds (RemoteError / TimeoutError / ...).
  [[noreturn]] void rethrow() const;
  void throw_if_raised() const {
    if (raised()) rethrow();
  }
  // Blocks until the signal is raised or `deadline` passes (never() must not be passed: a
  // wait for the group's abort alone is no bound). True once raised.
  bool wait_until(const Deadline& deadline) const;
  // Runs `fn` now if already raised, else once when raised (from the raising thread).
  void on_raise(std::function<void()> fn);
  void set_self_rank(int r) { self_ = r; }
  int self_rank() const { return self_; }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable raised_cv_;
  std::atomic<bool> raised_{false};
  int self_;
  int culprit_ = -1;
  ErrorCode code_ = ErrorCode::Remote;
  std::string reason_;
  std::vector<std::function<void()>> listeners_;
};

}  // namespace actorcc
