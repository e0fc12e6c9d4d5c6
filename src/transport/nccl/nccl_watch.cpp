#include "transport/nccl/nccl_watch.hpp"

#include <cuda_runtime.h>

#include <vector>

#include "common/deadline.hpp"
#include "common/env.hpp"

namespace actorcc::nccl {

namespace {
std::chrono::microseconds poll_interval() {
  // setting: ACTORCC_NCCL_POLL_US - how often (us) NCCL calls in flight are checked against the
  // timeout, NCCL's async error and the group's abort (default 1000)
  static const auto us = [] {
    auto v = env::get_int("ACTORCC_NCCL_POLL_US");
    return std::chrono::microseconds(v && *v > 0 ? *v : 1000);
  }();
  return us;
}
}  // namespace

NcclWatch::NcclWatch(std::shared_ptr<AbortSignal> abort, int rank, int device, std::chrono::milliseconds timeout,
                     std::string who, std::function<std::string()> async_error)
    : abort_(std::move(abort)),
      rank_(rank),
      device_(device),
      timeout_(timeout),
      who_(std::move(who)),
      async_error_(std::move(async_error)),
      thread_([this] { loop(); }) {}

NcclWatch::~NcclWatch() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  // Destroying an event that is still pending is allowed: its resources go when it completes.
  for (auto& p : pending_) cudaEventDestroy(static_cast<cudaEvent_t>(p.event));
}

void NcclWatch::track(const char* call, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    return;
  }
  cudaEvent_t ev = nullptr;
  if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess || cudaEventRecord(ev, s) != cudaSuccess) {
    cudaGetLastError();
    if (ev) cudaEventDestroy(ev);
    return;  // untracked: still bounded by the group's abort
  }
  const Deadline dl = Deadline::after(timeout_);
  std::lock_guard<std::mutex> g(mu_);
  pending_.push_back({ev, dl.when(), call});
  cv_.notify_all();
}

void NcclWatch::loop() {
  cudaSetDevice(device_);
  // Relaxed: this thread's event queries must not count as unsafe calls during another
  // thread's graph capture (global mode), which would invalidate that capture (as NCCL's own
  // proxy threads do). The events it queries are never part of a capture.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    // Idle: nothing to bound, so no polling either.
    if (pending_.empty()) cv_.wait(lk, [&] { return stop_ || !pending_.empty(); });
    else cv_.wait_for(lk, poll_interval());
    if (stop_) continue;
    if (abort_->raised()) {
      // The communicator is being aborted: nothing left to bound.
      for (auto& p : pending_) cudaEventDestroy(static_cast<cudaEvent_t>(p.event));
      pending_.clear();
      continue;
    }
    // Completed events leave the queue; the first that is late or failed raises the abort.
    std::string failure;
    ErrorCode code = ErrorCode::Remote;
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto ev = static_cast<cudaEvent_t>(it->event);
      const cudaError_t q = cudaEventQuery(ev);
      if (q == cudaSuccess) {
        cudaEventDestroy(ev);
        it = pending_.erase(it);
        continue;
      }
      if (q != cudaErrorNotReady) {
        cudaGetLastError();
        failure = std::string(it->call) + " failed on the device: " + cudaGetErrorString(q);
        break;
      }
      if (std::chrono::steady_clock::now() >= it->deadline) {
        code = ErrorCode::Timeout;
        failure = std::string(it->call) + " did not complete within " + std::to_string(timeout_.count()) +
                  " ms: a rank of " + who_ + " has not called it, has died, or cannot be reached";
        break;
      }
      ++it;
    }
    lk.unlock();
    // The async error takes the communicator's lock: never while holding ours.
    if (failure.empty())
      if (std::string e = async_error_(); !e.empty()) failure = "NCCL reports an error on " + who_ + ": " + e;
    if (!failure.empty())
      abort_->raise(rank_, code, "rank " + std::to_string(rank_) + ": NCCL " + failure);
    lk.lock();
  }
}

}  // namespace actorcc::nccl
