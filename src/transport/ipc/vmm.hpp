// RAII owners for the device memory the IPC transport shares: a VMM allocation this process
// created (exportable as a POSIX file descriptor), a peer's allocation imported from such a
// descriptor, and the legacy cudaIpc equivalents used only when VMM is unavailable.
#pragma once
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "common/unique_fd.hpp"

namespace actorcc::ipc {

// A mapped VMM range: physical handle + VA reservation + mapping, released in reverse order.
class VmmRegion {
 public:
  VmmRegion() = default;
  ~VmmRegion() { reset(); }
  VmmRegion(VmmRegion&& o) noexcept { *this = std::move(o); }
  VmmRegion& operator=(VmmRegion&& o) noexcept;
  VmmRegion(const VmmRegion&) = delete;
  VmmRegion& operator=(const VmmRegion&) = delete;

  // Allocates `bytes` (rounded up to the granularity) on CUDA device `device` (this process's
  // ordinal), exportable as a POSIX fd, mapped read-write for that device. Throws CudaError.
  static VmmRegion allocate(size_t bytes, int device);
  // Imports a peer's allocation from `fd` (size `bytes`), maps it and grants access to
  // `device` (this process's ordinal: works when each process sees only its own GPU).
  static VmmRegion import(int fd, size_t bytes, int device);

  UniqueFd export_fd() const;  // a new descriptor for the allocation
  void* ptr() const { return reinterpret_cast<void*>(va_); }
  size_t size() const { return size_; }
  void reset() noexcept;

 private:
  CUmemGenericAllocationHandle handle_ = 0;
  bool have_handle_ = false;
  CUdeviceptr va_ = 0;
  size_t size_ = 0;
  bool mapped_ = false;
};

// Legacy fallback: a cudaMalloc'd range this process owns, or a peer's range opened through
// cudaIpcOpenMemHandle.
class LegacyRegion {
 public:
  LegacyRegion() = default;
  ~LegacyRegion() { reset(); }
  LegacyRegion(LegacyRegion&& o) noexcept { *this = std::move(o); }
  LegacyRegion& operator=(LegacyRegion&& o) noexcept {
    if (this != &o) { reset(); ptr_ = std::exchange(o.ptr_, nullptr); opened_ = o.opened_; size_ = o.size_; }
    return *this;
  }
  LegacyRegion(const LegacyRegion&) = delete;
  LegacyRegion& operator=(const LegacyRegion&) = delete;

  static LegacyRegion allocate(size_t bytes);
  static LegacyRegion open(const void* handle64, size_t bytes);  // 64-byte cudaIpcMemHandle_t
  void handle(void* out64) const;                                  // cudaIpcGetMemHandle
  void* ptr() const { return ptr_; }
  size_t size() const { return size_; }
  void reset() noexcept;

 private:
  void* ptr_ = nullptr;
  bool opened_ = false;
  size_t size_ = 0;
};

}  // namespace actorcc::ipc
