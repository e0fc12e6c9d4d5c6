// What this library does not serve, refused with ncclInvalidUsage and a text naming the rank and
// the reason (exported, so callers that only link them still load): NCCL's device-side
// communicators and window pointers, one-sided signals; and the debug-init reload
// (nothing to reload).
#include "comm.hpp"

using namespace actorcc::ncclabi;

namespace {
ncclResult_t refuse(ncclComm* comm, const char* fn, const char* why) noexcept {
  try {
    const std::string who = valid(comm) ? rank_prefix(comm) : std::string();
    return set_error(valid(comm) ? comm : nullptr, ncclInvalidUsage, std::string(fn) + ": " + who + why);
  } catch (...) {
    return ncclInvalidUsage;
  }
}
}  // namespace

constexpr const char* kDevComm =
    "NCCL's device-side communicators (symmetric-memory kernels that read NCCL's own device structures) cannot "
    "be served by actorcc";

extern "C" ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements*, ncclDevComm*) {
  return refuse(comm, "ncclDevCommCreate", kDevComm);
}
ACTORCC_NCCL_ALIAS(ncclDevCommCreate)

extern "C" ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm*) {
  return refuse(comm, "ncclDevCommDestroy", kDevComm);
}
ACTORCC_NCCL_ALIAS(ncclDevCommDestroy)

constexpr const char* kOneSided =
    "one-sided signals (ncclPutSignal/ncclSignal/ncclWaitSignal) are not implemented in actorcc's NCCL library";

extern "C" ncclResult_t ncclPutSignal(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int,
                                      unsigned int, ncclComm_t comm, cudaStream_t) {
  return refuse(comm, "ncclPutSignal", kOneSided);
}
ACTORCC_NCCL_ALIAS(ncclPutSignal)
extern "C" ncclResult_t ncclSignal(int, int, int, unsigned int, ncclComm_t comm, cudaStream_t) {
  return refuse(comm, "ncclSignal", kOneSided);
}
ACTORCC_NCCL_ALIAS(ncclSignal)
extern "C" ncclResult_t ncclWaitSignal(int, void*, ncclComm_t comm, cudaStream_t) {
  return refuse(comm, "ncclWaitSignal", kOneSided);
}
ACTORCC_NCCL_ALIAS(ncclWaitSignal)

// The device API's pointers into a window: they exist only for NCCL's symmetric-memory windows
// (and multimem is NVLS, which actorcc never uses). The window names no communicator here.
constexpr const char* kWindowPointers =
    "device pointers into a window (NCCL's symmetric memory, and multimem) are not available in actorcc's NCCL "
    "library";
extern "C" ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void** out) {
  if (out) *out = nullptr;
  return refuse(nullptr, "ncclGetLsaMultimemDevicePointer", kWindowPointers);
}
ACTORCC_NCCL_ALIAS(ncclGetLsaMultimemDevicePointer)
extern "C" ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t, size_t, void*, void** out) {
  if (out) *out = nullptr;
  return refuse(nullptr, "ncclGetMultimemDevicePointer", kWindowPointers);
}
ACTORCC_NCCL_ALIAS(ncclGetMultimemDevicePointer)
extern "C" ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t, size_t, int, void** out) {
  if (out) *out = nullptr;
  return refuse(nullptr, "ncclGetLsaDevicePointer", kWindowPointers);
}
ACTORCC_NCCL_ALIAS(ncclGetLsaDevicePointer)
extern "C" ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void** out) {
  if (out) *out = nullptr;
  return refuse(nullptr, "ncclGetPeerDevicePointer", kWindowPointers);
}
ACTORCC_NCCL_ALIAS(ncclGetPeerDevicePointer)

// NCCL rereads NCCL_DEBUG here; actorcc's logging reads ACTORCC_LOG once, and there is nothing to
// reload (a void function: it cannot report anything).
extern "C" void ncclResetDebugInit() {}
ACTORCC_NCCL_ALIAS(ncclResetDebugInit)
