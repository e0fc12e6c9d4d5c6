// Memory: ncclMemAlloc / ncclMemFree, and the registrations. ncclCommRegister is local in NCCL
// and actorcc's zero-copy registration (Communicator::register_buffer) is collective, so a
// registration here is a validated handle that changes nothing about how data moves: every
// collective accepts any buffer. ncclCommWindowRegister (collective in NCCL) is tracked the same
// way: the window handle names the buffer, and collectives accept it like any other.
#include <cstdlib>
#include <memory>
#include <mutex>

#include "comm.hpp"

#if ACTORCC_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace actorcc::ncclabi {
namespace {

ncclResult_t make_registration(ncclComm* comm, void* buf, size_t size, void** out, const char* fn) noexcept {
  if (!valid(comm)) return bad_comm(fn, comm);
  if (!out) return set_error(comm, ncclInvalidArgument, std::string(fn) + ": " + rank_prefix(comm) + "handle is NULL");
  if (!buf || size == 0)
    return set_error(comm, ncclInvalidArgument,
                     std::string(fn) + ": " + rank_prefix(comm) + "buffer is NULL or size is 0");
  return guarded(comm, fn, [&] {
    auto reg = std::make_unique<RegisteredBuffer>(RegisteredBuffer{buf, size});
    void* handle = reg.get();
    std::lock_guard<std::mutex> g(comm->reg_mu);
    comm->registrations.emplace(handle, std::move(reg));
    *out = handle;
    return ncclSuccess;
  });
}

ncclResult_t refuse_here(ncclComm* comm, const char* fn, const char* what) noexcept {
  return set_error(comm, ncclInvalidArgument, std::string(fn) + ": " + rank_prefix(comm) + what);
}

ncclResult_t drop_registration(ncclComm* comm, void* handle, const char* fn) noexcept {
  if (!valid(comm)) return bad_comm(fn, comm);
  std::unique_ptr<RegisteredBuffer> gone;  // freed outside the lock
  {
    std::lock_guard<std::mutex> g(comm->reg_mu);
    auto it = comm->registrations.find(handle);
    if (it == comm->registrations.end())
      return refuse_here(comm, fn, "not a registration handle of this communicator (or deregistered already)");
    gone = std::move(it->second);
    comm->registrations.erase(it);
  }
  return ncclSuccess;
}

// The CPU-only mode (no usable GPU, or ACTORCC_BACKEND=cpu) allocates host memory.
bool host_memory() noexcept { return current_device() < 0; }

}  // namespace
}  // namespace actorcc::ncclabi

using namespace actorcc::ncclabi;

extern "C" ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (!ptr) return set_error(nullptr, ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  if (host_memory()) {
    *ptr = std::malloc(size);
    return *ptr ? ncclSuccess
                : set_error(nullptr, ncclSystemError, "ncclMemAlloc: out of host memory for " + std::to_string(size) + " bytes");
  }
#if ACTORCC_WITH_CUDA
  const cudaError_t e = cudaMalloc(ptr, size);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *ptr = nullptr;
    return set_error(nullptr, ncclUnhandledCudaError,
                     std::string("ncclMemAlloc: cudaMalloc of ") + std::to_string(size) + " bytes failed: " + cudaGetErrorString(e));
  }
  return ncclSuccess;
#else
  return set_error(nullptr, ncclInternalError, "ncclMemAlloc: built without CUDA");
#endif
}
ACTORCC_NCCL_ALIAS(ncclMemAlloc)

extern "C" ncclResult_t ncclMemFree(void* ptr) {
  if (!ptr) return ncclSuccess;
#if ACTORCC_WITH_CUDA
  // Freed by what it is, not by the mode now: device (or managed) memory with cudaFree, host
  // memory from the CPU-only mode with free.
  cudaPointerAttributes attr{};
  const bool on_gpu = cudaPointerGetAttributes(&attr, ptr) == cudaSuccess &&
                      (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged);
  cudaGetLastError();
  if (on_gpu) {
    const cudaError_t e = cudaFree(ptr);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return set_error(nullptr, ncclUnhandledCudaError, std::string("ncclMemFree: cudaFree failed: ") + cudaGetErrorString(e));
    }
    return ncclSuccess;
  }
#endif
  std::free(ptr);
  return ncclSuccess;
}
ACTORCC_NCCL_ALIAS(ncclMemFree)

extern "C" ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return make_registration(comm, buff, size, handle, "ncclCommRegister");
}
ACTORCC_NCCL_ALIAS(ncclCommRegister)

extern "C" ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return drop_registration(comm, handle, "ncclCommDeregister");
}
ACTORCC_NCCL_ALIAS(ncclCommDeregister)

extern "C" ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                               int winFlags) {
  return make_registration(comm, buff, size, reinterpret_cast<void**>(win), "ncclCommWindowRegister");
}
ACTORCC_NCCL_ALIAS(ncclCommWindowRegister)

extern "C" ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return drop_registration(comm, win, "ncclCommWindowDeregister");
}
ACTORCC_NCCL_ALIAS(ncclCommWindowDeregister)

// The buffer a window was registered with.
extern "C" ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  const char* fn = "ncclWinGetUserPtr";
  if (!valid(comm)) return bad_comm(fn, comm);
  if (!outUserPtr) return refuse_here(comm, fn, "outUserPtr is NULL");
  std::lock_guard<std::mutex> g(comm->reg_mu);
  auto it = comm->registrations.find(win);
  if (it == comm->registrations.end()) return refuse_here(comm, fn, "not a window of this communicator");
  *outUserPtr = it->second->buf;
  return ncclSuccess;
}
ACTORCC_NCCL_ALIAS(ncclWinGetUserPtr)
