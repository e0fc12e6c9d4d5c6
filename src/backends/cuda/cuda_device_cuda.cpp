// Which CUDA device this rank uses. Queried through the runtime, which reports "no device" (not
// a crash) on machines without a driver.
#include <cuda_runtime.h>

#include "backends/backend.hpp"

namespace actorcc {

int cuda_resolve_device(int requested) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return -1;
  }
  if (requested >= 0) {
    if (requested >= n)
      throw InvalidArgument("device " + std::to_string(requested) + " requested but this process sees only " +
                            std::to_string(n) + " CUDA device(s) (CUDA_VISIBLE_DEVICES masks the rest)");
    return requested;
  }
  int cur = 0;
  if (cudaGetDevice(&cur) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return cur;
}

}  // namespace actorcc
