// AbortSignal: the one place a rank learns that the group is broken (a peer died, aborted,
// or timed out). Every wait loop polls raised(); transports subscribe with on_raise() to set
// their own abort words (shared memory, host-mapped memory read by GPU kernels).
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "actorcc/error.hpp"
#include "common/deadline.hpp"

namespace actorcc {

// Throws `e` with culprits() set to `ranks` (its culprit included).
template <typename E>
[[noreturn]] void throw_with_culprits(E e, std::vector<int> ranks) {
  e.set_culprits(std::move(ranks));
  throw e;
}

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
  // As on_raise, replacing the pending listener registered under the same `key`: for an owner
  // made again and again over one signal (a suspended backend's shared segment, remade on every
  // resume), so the list does not grow with each remake.
  void on_raise(const void* key, std::function<void()> fn);
  void set_self_rank(int r) { self_ = r; }
  int self_rank() const { return self_; }

  // A rank the root reported lost (its connection dropped without a goodbye), or the host of a
  // root that vanished: raises the signal with it if nothing did yet, and records it either way.
  // Ranks killed together reach the root one by one; the second loss is news too: the error's
  // culprits() and a shrink (which must not wait for any dead rank) read it from lost().
  void raise_lost(int rank, const std::string& reason);
  // The ranks recorded by raise_lost (ascending).
  std::vector<int> lost() const;

  // While a LossWatch lives, `fn(rank, reason)` runs (on the reporting thread) for each loss
  // raise_lost records, and once at its construction for each recorded before. Its destructor
  // waits for a call in progress: no call runs after it returns.
  class LossWatch {
   public:
    LossWatch(AbortSignal& s, std::function<void(int, const std::string&)> fn);
    ~LossWatch();
    LossWatch(const LossWatch&) = delete;
    LossWatch& operator=(const LossWatch&) = delete;

   private:
    AbortSignal& s_;
    uint64_t id_;
  };

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable raised_cv_;
  std::atomic<bool> raised_{false};
  int self_;
  int culprit_ = -1;
  ErrorCode code_ = ErrorCode::Remote;
  std::string reason_;
  std::vector<std::function<void()>> listeners_;
  std::vector<const void*> listener_keys_;  // listeners_[i]'s key (nullptr: none)
  // Under loss_mu_ (held while a watcher runs, so that ~LossWatch can wait for it): the losses
  // and the watchers. Never taken with mu_ held.
  mutable std::mutex loss_mu_;
  std::vector<std::pair<int, std::string>> lost_;
  uint64_t next_watch_ = 0;
  std::vector<std::pair<uint64_t, std::function<void(int, const std::string&)>>> watches_;
};

}  // namespace actorcc
