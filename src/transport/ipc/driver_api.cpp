#include "transport/ipc/driver_api.hpp"

#include <cuda_runtime.h>

#include "actorcc/error.hpp"

namespace actorcc::ipc {
namespace {

// CUDA 12.0 ABI of every entry used here (all exist since 11.x with unchanged signatures).
constexpr unsigned kDriverAbi = 12000;

template <typename Fn>
bool resolve(Fn& fn, const char* name, std::string& err) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, kDriverAbi, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !p) {
    cudaGetLastError();
    if (err.empty())
      err = std::string("driver entry point ") + name + " unavailable (" + cudaGetErrorString(e) + ", query " +
            std::to_string(int(q)) + ")";
    return false;
  }
  fn = reinterpret_cast<Fn>(p);
  return true;
}

DriverApi load() {
  DriverApi d;
  bool ok = true;
#define ACTORCC_DRIVER_RESOLVE(name) ok &= resolve(d.name, #name, d.error);
  ACTORCC_DRIVER_ENTRIES(ACTORCC_DRIVER_RESOLVE)
#undef ACTORCC_DRIVER_RESOLVE
  d.ok = ok;
  return d;
}

}  // namespace

const DriverApi& DriverApi::get() {
  static const DriverApi table = load();  // magic static: thread-safe one-time init
  return table;
}

std::string DriverApi::describe(CUresult r) const {
  const char* s = nullptr;
  if (cuGetErrorString && cuGetErrorString(r, &s) == CUDA_SUCCESS && s) return std::string(s) + " (" + std::to_string(int(r)) + ")";
  return "CUresult " + std::to_string(int(r));
}

void DriverApi::check(CUresult r, const char* what) const {
  if (r != CUDA_SUCCESS) throw CudaError(std::string(what) + ": " + describe(r));
}

}  // namespace actorcc::ipc
