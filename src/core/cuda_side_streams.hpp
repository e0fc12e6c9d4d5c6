// The copy-engine one-shot's side streams and the events that fork them from and join them back
// into the caller's stream (cuda::CeLanes), owned by the CUDA backend: created on its device at
// setup, destroyed with it (after its destructor has synchronized the device).
#pragma once
#include <cuda_runtime.h>

#include "algorithms/cuda_algorithms.hpp"

namespace actorcc {

class SideStreams {
 public:
  SideStreams() = default;
  ~SideStreams() { release(); }
  SideStreams(const SideStreams&) = delete;
  SideStreams& operator=(const SideStreams&) = delete;

  // Creates n (1 or 2) non-blocking streams and the events on the current device.
  cudaError_t create(int n) {
    release();
    n = n < 1 ? 1 : n > 2 ? 2 : n;
    cudaError_t e = cudaEventCreateWithFlags(&l_.fork, cudaEventDisableTiming);
    for (int i = 0; i < n && e == cudaSuccess; ++i) {
      e = cudaStreamCreateWithFlags(&l_.side[i], cudaStreamNonBlocking);
      if (e == cudaSuccess) e = cudaEventCreateWithFlags(&l_.join[i], cudaEventDisableTiming);
      if (e == cudaSuccess) l_.n = i + 1;
    }
    return e;
  }
  const cuda::CeLanes& lanes() const { return l_; }

 private:
  void release() {
    for (int i = 0; i < 2; ++i) {
      if (l_.join[i]) cudaEventDestroy(l_.join[i]);
      if (l_.side[i]) cudaStreamDestroy(l_.side[i]);
    }
    if (l_.fork) cudaEventDestroy(l_.fork);
    l_ = cuda::CeLanes{};
  }
  cuda::CeLanes l_;
};

}  // namespace actorcc
