// The CUDA backend's passes: one grid-stride kernel over adapt_math.hpp's element maths, launched
// on the call's stream so it is ordered with the collective and captured into CUDA graphs with
// it. A device-resident PreMulSum scalar is read by the kernel itself, so a graph replayed after
// the scalar changed uses the new value.
#include <cuda_runtime.h>

#include <string>

#include "actorcc/error.hpp"
#include "adapt_state.hpp"

namespace actorcc::ncclabi::cuda {
namespace {

__global__ void xform_kernel(Xform x, const uint8_t* src, uint8_t* dst, size_t n) {
  const uint64_t s = x.scalar_ptr ? load_bits(x.scalar_ptr, nccl_type_size(x.type)) : x.scalar;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    xform_one(x, s, src, dst, i);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CudaError(std::string("NCCL reduction adapter: ") + what + ": " + cudaGetErrorString(e));
}

// Makes the communicator's device current for the enclosed calls (the caller's thread may have
// another one current) and restores the caller's afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (device < 0 || cudaGetDevice(&prev_) != cudaSuccess || prev_ == device) return;
    check(cudaSetDevice(device), "cudaSetDevice");
    switched_ = true;
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
  bool switched_ = false;
};

}  // namespace

void xform(const Xform& x, const void* src, void* dst, size_t n, void* stream, int device) {
  if (n == 0) return;
  DeviceGuard g(device);
  constexpr int kThreads = 256;
  const size_t want = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < 4096 ? want : 4096);
  xform_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), n);
  check(cudaGetLastError(), "launching the element pass");
}

bool capturing(void* stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &st), "cudaStreamIsCapturing");
  return st != cudaStreamCaptureStatusNone;
}

void* alloc(size_t bytes, int device) {
  DeviceGuard g(device);
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), ("cudaMalloc of " + std::to_string(bytes) + " bytes of scratch").c_str());
  return p;
}

void free(void* p, int device) noexcept {
  if (!p) return;
  try {
    DeviceGuard g(device);
    cudaFree(p);  // waits for the kernels that may still use it
  } catch (const Error&) {
  }
}

}  // namespace actorcc::ncclabi::cuda
