// The CUDA driver functions the IPC transport needs, resolved at run time through
// cudaGetDriverEntryPointByVersion so libactorcc never links libcuda: it loads (and reports
// "no GPU") on machines without a driver. One table per process, filled on first use.
#pragma once
#include <cuda.h>

#include <string>

namespace actorcc::ipc {

struct DriverApi {
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuMemCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) = nullptr;
  CUresult (*cuMemRelease)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*cuMemExportToShareableHandle)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                                           unsigned long long) = nullptr;
  CUresult (*cuMemImportFromShareableHandle)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType) = nullptr;
  CUresult (*cuMemAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*cuMemAddressFree)(CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*cuMemUnmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult (*cuMemGetAllocationGranularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuMemGetAddressRange)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;

  bool ok = false;       // every entry above resolved
  std::string error;     // why not, when !ok

  // The process-wide table (resolved once, thread-safe). Never throws.
  static const DriverApi& get();
  // Throws CudaError "<what>: <driver error string>" when r != CUDA_SUCCESS.
  void check(CUresult r, const char* what) const;
  std::string describe(CUresult r) const;
};

}  // namespace actorcc::ipc
