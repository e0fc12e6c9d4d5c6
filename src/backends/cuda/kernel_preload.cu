#include "backends/cuda/kernel_preload.hpp"

#include <cuda_runtime.h>

#include <set>
#include <utility>

namespace actorcc::cuda {

namespace {

// The first calls of the stacks actorcc serves: a small all-reduce (torch's barrier, a loss, a
// flag) and a mid-sized one, in float32 or bfloat16, summed.
constexpr DataType kDtypes[] = {DataType::Float32, DataType::BFloat16};
constexpr size_t kBytes[] = {4u << 10, 1u << 20};

void load(int device, const Launch* launch, DeviceComm dc, Tuning tune, std::optional<Route> forced, int world) {
  if (cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  // A capture the caller begins meanwhile on another thread must neither stop these loads nor
  // be invalidated by them.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  LoadOnly only;
  std::set<std::pair<Route, DataType>> done;
  for (DataType t : kDtypes)
    for (size_t bytes : kBytes) {
      RouteArgs ra = plan_args(Collective::AllReduce, bytes, false, world);
      ra.esz = dtype_size(t);
      const Route r = pick_route(ra, tune, forced);
      if (r == Route::Copy || !done.insert({r, t}).second) continue;
      CallArgs ca;
      // Never dereferenced: in LoadOnly mode the launch function only names its kernel.
      ca.send = ca.recv = dc.ws[dc.rank];
      ca.count = bytes / ra.esz;
      ca.dtype = t;
      ca.op = RedOp::Sum;
      ca.coll = static_cast<int>(Collective::AllReduce);
      launch[static_cast<size_t>(r)](dc, tune, ca);
    }
  // A load that failed is the first call's to report, where it launches the kernel itself.
  cudaGetLastError();
}

}  // namespace

KernelPreload::KernelPreload(int device, const Launch* launch, const DeviceComm& dc, const Tuning& tune,
                             std::optional<Route> forced, int world)
    : thread_(load, device, launch, dc, tune, forced, world) {}

KernelPreload::~KernelPreload() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace actorcc::cuda
