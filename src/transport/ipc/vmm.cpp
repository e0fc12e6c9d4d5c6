#include "transport/ipc/vmm.hpp"

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "actorcc/error.hpp"
#include "transport/ipc/driver_api.hpp"

namespace actorcc::ipc {

namespace {

const DriverApi& api() {
  const DriverApi& d = DriverApi::get();
  if (!d.ok) throw CudaError("CUDA driver API unavailable: " + d.error);
  return d;
}

CUmemAllocationProp prop_for(const DriverApi& d, int device) {
  CUdevice dev = 0;
  d.check(d.cuDeviceGet(&dev, device), "cuDeviceGet");
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

void map_and_grant(const DriverApi& d, CUdeviceptr& va, size_t bytes, CUmemGenericAllocationHandle h, int device,
                   bool& mapped) {
  d.check(d.cuMemAddressReserve(&va, bytes, 0, 0, 0), "cuMemAddressReserve");
  d.check(d.cuMemMap(va, bytes, 0, h, 0), "cuMemMap");
  mapped = true;
  CUdevice dev = 0;
  d.check(d.cuDeviceGet(&dev, device), "cuDeviceGet");
  CUmemAccessDesc ad{};
  ad.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ad.location.id = dev;
  ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  d.check(d.cuMemSetAccess(va, bytes, &ad, 1), "cuMemSetAccess");
}

}  // namespace

VmmRegion& VmmRegion::operator=(VmmRegion&& o) noexcept {
  if (this != &o) {
    reset();
    handle_ = o.handle_;
    have_handle_ = std::exchange(o.have_handle_, false);
    va_ = std::exchange(o.va_, 0);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, false);
  }
  return *this;
}

VmmRegion VmmRegion::allocate(size_t bytes, int device) {
  const DriverApi& d = api();
  CUmemAllocationProp p = prop_for(d, device);
  size_t gran = 0;
  d.check(d.cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
  if (gran == 0) gran = 2 << 20;
  VmmRegion r;
  r.size_ = (bytes + gran - 1) / gran * gran;
  d.check(d.cuMemCreate(&r.handle_, r.size_, &p, 0), "cuMemCreate");
  r.have_handle_ = true;
  map_and_grant(d, r.va_, r.size_, r.handle_, device, r.mapped_);
  return r;
}

VmmRegion VmmRegion::import(int fd, size_t bytes, int device) {
  const DriverApi& d = api();
  VmmRegion r;
  r.size_ = bytes;
  d.check(d.cuMemImportFromShareableHandle(&r.handle_, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "cuMemImportFromShareableHandle");
  r.have_handle_ = true;
  map_and_grant(d, r.va_, r.size_, r.handle_, device, r.mapped_);
  return r;
}

UniqueFd VmmRegion::export_fd() const {
  const DriverApi& d = api();
  int fd = -1;
  d.check(d.cuMemExportToShareableHandle(&fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          "cuMemExportToShareableHandle");
  return UniqueFd(fd);
}

void VmmRegion::reset() noexcept {
  const DriverApi& d = DriverApi::get();
  if (!d.ok) return;
  if (mapped_) d.cuMemUnmap(va_, size_);
  if (va_) d.cuMemAddressFree(va_, size_);
  if (have_handle_) d.cuMemRelease(handle_);
  mapped_ = false;
  va_ = 0;
  have_handle_ = false;
  size_ = 0;
}

LegacyRegion LegacyRegion::allocate(size_t bytes) {
  LegacyRegion r;
  cudaError_t e = cudaMalloc(&r.ptr_, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw CudaError(std::string("cudaMalloc(workspace): ") + cudaGetErrorString(e));
  }
  r.size_ = bytes;
  return r;
}

LegacyRegion LegacyRegion::open(const void* handle64, size_t bytes) {
  LegacyRegion r;
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle64, sizeof h);
  cudaError_t e = cudaIpcOpenMemHandle(&r.ptr_, h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    cudaGetLastError();
    r.ptr_ = nullptr;
    throw CudaError(std::string("cudaIpcOpenMemHandle: ") + cudaGetErrorString(e));
  }
  r.opened_ = true;
  r.size_ = bytes;
  return r;
}

void LegacyRegion::handle(void* out64) const {
  cudaIpcMemHandle_t h;
  cudaError_t e = cudaIpcGetMemHandle(&h, ptr_);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw CudaError(std::string("cudaIpcGetMemHandle: ") + cudaGetErrorString(e));
  }
  std::memcpy(out64, &h, sizeof h);
}

void LegacyRegion::reset() noexcept {
  if (ptr_) {
    if (opened_) cudaIpcCloseMemHandle(ptr_);
    else cudaFree(ptr_);
    cudaGetLastError();
  }
  ptr_ = nullptr;
  opened_ = false;
  size_ = 0;
}

}  // namespace actorcc::ipc
