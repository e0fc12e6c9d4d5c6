// CUDA runtime RAII owners and the one CUDA error check, for the CUDA-side code (backends/cuda,
// backends/nccl, the ipc transport). Header-only: only translation units built with the CUDA
// toolkit include it.
#pragma once
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <version>
#if defined(__cpp_lib_source_location)
#include <source_location>
#endif

#include "actorcc/error.hpp"

namespace actorcc::cuda_rt {

#if defined(__cpp_lib_source_location)
using SourceLocation = std::source_location;
#else
// A compiler without std::source_location (older nvcc front ends): the check names no place.
struct SourceLocation {
  static constexpr SourceLocation current() { return {}; }
  constexpr const char* file_name() const { return ""; }
  constexpr unsigned line() const { return 0; }
};
#endif

// Throws CudaError "[rank R: ]what: <CUDA's message> (at src/<file>:<line>)" when e is an error,
// clearing CUDA's sticky last error first, so the next call does not fail for this one.
inline void check(cudaError_t e, std::string_view what, int rank = -1,
                  SourceLocation where = SourceLocation::current()) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  std::string_view file = where.file_name();
  if (auto p = file.rfind("/src/"); p != std::string_view::npos) file.remove_prefix(p + 1);
  std::string msg = std::string(what) + ": " + cudaGetErrorString(e);
  if (!file.empty()) msg += " (at " + std::string(file) + ":" + std::to_string(where.line()) + ")";
  throw CudaError(msg, rank);
}

// Makes `dev` current for a scope and restores the caller's device after it.
class DeviceGuard {
 public:
  explicit DeviceGuard(int dev) {
    if (cudaGetDevice(&prev_) == cudaSuccess && prev_ != dev) check(cudaSetDevice(dev), "cudaSetDevice");
    else prev_ = -1;
  }
  ~DeviceGuard() {
    if (prev_ >= 0) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

// `n` zeroed bytes of pinned host memory mapped into every device: words the host and the kernels
// both read and write without a copy (abort flags, error records).
class HostMappedWords {
 public:
  explicit HostMappedWords(size_t n = 64) {
    check(cudaHostAlloc(reinterpret_cast<void**>(&host_), n, cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc");
    std::memset(host_, 0, n);
    check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_), host_, 0), "cudaHostGetDevicePointer");
  }
  ~HostMappedWords() {
    if (host_) cudaFreeHost(host_);
  }
  HostMappedWords(const HostMappedWords&) = delete;
  HostMappedWords& operator=(const HostMappedWords&) = delete;
  int* host() const { return host_; }
  int* dev() const { return dev_; }

 private:
  int* host_ = nullptr;
  int* dev_ = nullptr;
};

// A zeroed cudaMalloc'd range.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) {
    check(cudaMalloc(&p_, n), "cudaMalloc");
    check(cudaMemset(p_, 0, n), "cudaMemset");
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

// Owns one CUDA runtime handle (cudaEvent_t, cudaStream_t: pointers to opaque structs), made
// by Create(&h, flags) and released by Destroy(h) when the owner goes.
template <typename Handle, auto Create, auto Destroy>
class RuntimeHandle {
 public:
  Handle get() const { return h_.get(); }

 protected:
  RuntimeHandle(unsigned flags, std::string_view what) {
    Handle h = nullptr;
    check(Create(&h, flags), what);
    h_.reset(h);
  }

 private:
  struct Release {
    void operator()(Handle h) const { Destroy(h); }
  };
  std::unique_ptr<std::remove_pointer_t<Handle>, Release> h_;
};

// A CUDA event (no timing unless asked for).
class Event : public RuntimeHandle<cudaEvent_t, cudaEventCreateWithFlags, cudaEventDestroy> {
 public:
  explicit Event(unsigned flags = cudaEventDisableTiming) : RuntimeHandle(flags, "cudaEventCreate") {}
};

// A non-blocking CUDA stream (it never waits for the legacy default stream), on the current device.
class Stream : public RuntimeHandle<cudaStream_t, cudaStreamCreateWithFlags, cudaStreamDestroy> {
 public:
  Stream() : RuntimeHandle(cudaStreamNonBlocking, "cudaStreamCreate") {}
};

}  // namespace actorcc::cuda_rt
