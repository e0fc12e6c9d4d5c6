// The CUDA device a new communicator uses: the caller's current device (NCCL's rule), or none
// (the CPU backend on host buffers) when no GPU is usable or ACTORCC_BACKEND=cpu.
#include <cstdlib>
#include <cstring>

#include "comm.hpp"

#if ACTORCC_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace actorcc::ncclabi {

int current_device() noexcept {
  // ACTORCC_BACKEND is the core's setting (src/common/options.cpp); read here too because the
  // device is chosen before the core sees the options.
  const char* b = std::getenv("ACTORCC_BACKEND");
  if (b && std::strcmp(b, "cpu") == 0) return -1;
#if ACTORCC_WITH_CUDA
  int n = 0, d = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0 || cudaGetDevice(&d) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return d;
#else
  return -1;
#endif
}

void set_device(int device) noexcept {
#if ACTORCC_WITH_CUDA
  if (device >= 0 && cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
#else
  (void)device;
#endif
}

}  // namespace actorcc::ncclabi
