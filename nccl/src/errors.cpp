// Error codes and texts: ncclGetErrorString, ncclGetLastError, the one place where actorcc's
// exceptions become ncclResult_t values (no exception crosses the C ABI), and the one path by
// which a collective call's bad argument reaches the other ranks.
#include <cstring>
#include <exception>
#include <new>

#include "comm.hpp"

namespace actorcc::ncclabi {

namespace {
// The calling thread's last error (ncclGetLastError(NULL)), and the buffer a comm's text is
// copied into before it is returned (so the pointer stays valid while the comm changes it).
thread_local std::string t_last_error;
thread_local std::string t_returned;
}  // namespace

ncclResult_t to_nccl(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::Remote: return ncclRemoteError;
    // A wait that ran past ACTORCC_TIMEOUT_S or the join timeout: NCCL 2.30.3's code for a call
    // that ran out of time (NCCL itself never times a host call out; its device API's barriers
    // return it). A client built against an older nccl.h sees an unknown code, still an error,
    // and ncclGetErrorString names it.
    case ErrorCode::Timeout: return ncclTimeout;
    case ErrorCode::InvalidArgument: return ncclInvalidArgument;
    case ErrorCode::Cuda: return ncclUnhandledCudaError;
    case ErrorCode::System: return ncclSystemError;
    case ErrorCode::Unsupported: return ncclInvalidUsage;
    case ErrorCode::Internal: return ncclInternalError;
  }
  return ncclInternalError;
}

std::string rank_prefix(const ncclComm* comm) {
  if (!comm || comm->rank < 0) return {};
  return "rank " + std::to_string(comm->rank) + ": ";
}

ncclResult_t set_error(ncclComm* comm, ncclResult_t code, const std::string& text) noexcept {
  try {
    t_last_error = text;
    if (valid(comm)) {
      std::lock_guard<std::mutex> g(comm->err_mu);
      comm->last_error = text;
    }
  } catch (...) {  // out of memory while copying a text: the code still goes back
  }
  return code;
}

ncclResult_t fail_current(ncclComm* comm, const char* fn) noexcept {
  try {
    throw;
  } catch (const Error& e) {
    // actorcc's texts already open with the observing rank ("actorcc remote error: rank 1: ...").
    return set_error(comm, to_nccl(e.code()), std::string(fn) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return set_error(comm, ncclSystemError, std::string(fn) + ": " + rank_prefix(comm) + "out of memory");
  } catch (const std::exception& e) {
    return set_error(comm, ncclInternalError, std::string(fn) + ": " + rank_prefix(comm) + e.what());
  } catch (...) {
    return set_error(comm, ncclInternalError, std::string(fn) + ": " + rank_prefix(comm) + "unknown exception");
  }
}

ncclResult_t refuse_argument(ncclComm* comm, const char* fn, const std::string& what) noexcept {
  Communicator* c = valid(comm) && !comm->closing.load(std::memory_order_acquire)
                        ? comm->core.load(std::memory_order_acquire)
                        : nullptr;
  try {
    if (!c) return set_error(comm, ncclInvalidArgument, std::string(fn) + ": " + rank_prefix(comm) + what);
    c->refuse_call(InvalidArgument(std::string(fn) + ": " + what, c->rank()));
  } catch (...) {
    return fail_current(comm, fn);
  }
}

ncclResult_t bad_comm(const char* fn, const ncclComm* comm) noexcept {
  return set_error(nullptr, ncclInvalidArgument,
                   std::string(fn) + (comm ? ": comm is not a communicator of this library (freed, or never made)"
                                           : ": comm is NULL"));
}

}  // namespace actorcc::ncclabi

using namespace actorcc::ncclabi;

extern "C" const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled CUDA error (ncclGetLastError names the call and rank)";
    case ncclSystemError: return "system error: an OS call failed (ncclGetLastError says which)";
    case ncclInternalError: return "internal error in actorcc's NCCL library (ncclGetLastError says where)";
    case ncclInvalidArgument: return "invalid argument (ncclGetLastError names it)";
    case ncclInvalidUsage: return "invalid usage, or a call this library does not serve (ncclGetLastError says why)";
    case ncclRemoteError: return "remote error: a peer failed, aborted, timed out or left (ncclGetLastError names it)";
    case ncclInProgress: return "operation in progress";
    case ncclTimeout: return "timeout: a wait ran out of time, a peer stopped answering (ncclGetLastError names it)";
    default: return "unknown result code";
  }
}
ACTORCC_NCCL_ALIAS(ncclGetErrorString)

extern "C" const char* ncclGetLastError(ncclComm_t comm) {
  try {
    if (valid(comm)) {
      std::lock_guard<std::mutex> g(comm->err_mu);
      if (!comm->last_error.empty()) {
        t_returned = comm->last_error;
        return t_returned.c_str();
      }
    }
    t_returned = t_last_error;
    return t_returned.c_str();
  } catch (...) {
    return "";
  }
}
ACTORCC_NCCL_ALIAS(ncclGetLastError)
