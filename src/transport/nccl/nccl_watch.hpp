// NcclWatch: bounds NCCL calls that are already enqueued. NCCL's kernels wait for their peers
// without a bound, and a dead or stuck peer on another node leaves them spinning; the caller
// only ever blocks in its own stream synchronize. So after each enqueue an event is recorded
// on the stream, and one thread per communicator polls the events (each against its call's
// deadline) and the communicator's async error every millisecond or so. On expiry or error
// it raises the group's AbortSignal, whose listener aborts the communicator (ncclCommAbort):
// the kernels end, the stream drains, and every rank's next call raises the error.
// Calls captured into a CUDA graph are not tracked (their events would belong to the graph);
// a graph launch is bounded only by the group's abort.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/abort_signal.hpp"

namespace actorcc::nccl {

class NcclWatch {
 public:
  // `async_error` is polled from the watch thread (it takes the communicator's lock itself)
  // and returns "" while healthy. `who` names the communicator and its ranks in errors.
  NcclWatch(std::shared_ptr<AbortSignal> abort, int rank, int device, std::chrono::milliseconds timeout,
            std::string who, std::function<std::string()> async_error);
  ~NcclWatch();  // stops the thread; pending events are released
  NcclWatch(const NcclWatch&) = delete;
  NcclWatch& operator=(const NcclWatch&) = delete;

  // Records an event on `stream` (a cudaStream_t) after an NCCL call named `call`.
  void track(const char* call, void* stream);

 private:
  struct Pending {
    void* event;  // cudaEvent_t
    std::chrono::steady_clock::time_point deadline;
    const char* call;
  };
  void loop();

  std::shared_ptr<AbortSignal> abort_;
  int rank_, device_;
  std::chrono::milliseconds timeout_;
  std::string who_;
  std::function<std::string()> async_error_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace actorcc::nccl
