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

void finish_device_work(int device, int rank) {
#if ACTORCC_WITH_CUDA
  if (device < 0) return;
  int prev = -1;
  const bool have_prev = cudaGetDevice(&prev) == cudaSuccess;
  set_device(device);
  const cudaError_t e = cudaDeviceSynchronize();
  if (have_prev && prev != device) set_device(prev);
  // A kernel that gave up (timed out, aborted) ends with the group's error, which the caller
  // reports from the communicator; a failure of the wait itself is reported here.
  if (e != cudaSuccess && e != cudaErrorLaunchFailure) {
    cudaGetLastError();
    throw CudaError(std::string("cudaDeviceSynchronize: ") + cudaGetErrorString(e), rank);
  }
#else
  (void)device;
#endif
}

void record_event(void* event, void* stream, int rank) {
#if ACTORCC_WITH_CUDA
  const cudaError_t e = cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw CudaError(std::string("recording the config's launchCompletionEvent: ") + cudaGetErrorString(e), rank);
  }
#else
  (void)event;
  (void)stream;
  throw UnsupportedError("a launchCompletionEvent needs a CUDA build of this library", rank);
#endif
}

StagedInput::StagedInput(const void* src, size_t bytes, void* stream, int device, int rank)
    : stream_(stream), device_(device >= 0) {
#if ACTORCC_WITH_CUDA
  if (device_) {
    auto st = static_cast<cudaStream_t>(stream);
    cudaError_t e = cudaMallocAsync(&ptr_, bytes, st);
    if (e == cudaSuccess) e = cudaMemcpyAsync(ptr_, src, bytes, cudaMemcpyDeviceToDevice, st);
    if (e != cudaSuccess) {
      cudaGetLastError();
      if (ptr_) cudaFreeAsync(ptr_, st);
      throw CudaError(std::string("staging an in-place input of ") + std::to_string(bytes) +
                      " bytes: " + cudaGetErrorString(e), rank);
    }
    return;
  }
#endif
  device_ = false;
  host_.assign(static_cast<const uint8_t*>(src), static_cast<const uint8_t*>(src) + bytes);
  ptr_ = host_.data();
}

StagedInput::~StagedInput() {
#if ACTORCC_WITH_CUDA
  if (device_ && ptr_ && cudaFreeAsync(ptr_, static_cast<cudaStream_t>(stream_)) != cudaSuccess) cudaGetLastError();
#endif
}

}  // namespace actorcc::ncclabi
