// The CUDA driver functions the IPC transport needs, resolved at run time through
// cudaGetDriverEntryPointByVersion so libactorcc never links libcuda: it loads (and reports
// "no GPU") on machines without a driver. One table per process, filled on first use.
#pragma once
#include <cuda.h>

#include <string>

namespace actorcc::ipc {

// The entry points, each resolved by its unversioned name and typed by cuda.h's prototype.
#define ACTORCC_DRIVER_ENTRIES(X)                                                                 \
  X(cuGetErrorString) X(cuMemCreate) X(cuMemRelease) X(cuMemExportToShareableHandle)              \
  X(cuMemImportFromShareableHandle) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemMap)        \
  X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAllocationGranularity) X(cuDeviceGet)                 \
  X(cuDeviceGetAttribute) X(cuMemGetAddressRange)

struct DriverApi {
#define ACTORCC_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  ACTORCC_DRIVER_ENTRIES(ACTORCC_DRIVER_MEMBER)
#undef ACTORCC_DRIVER_MEMBER

  bool ok = false;       // every entry above resolved
  std::string error;     // why not, when !ok

  // The process-wide table (resolved once, thread-safe). Never throws.
  static const DriverApi& get();
  // Throws CudaError "<what>: <driver error string>" when r != CUDA_SUCCESS.
  void check(CUresult r, const char* what) const;
  std::string describe(CUresult r) const;
};

}  // namespace actorcc::ipc
