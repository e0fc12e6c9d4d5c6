// What this library does not serve, refused with ncclInvalidUsage and a text naming the rank and
// the reason (exported, so callers that only link them still load): elastic membership (shrink,
// revoke, grow and its id), NCCL's device-side communicators, and the debug-init reload.
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
constexpr const char* kElastic =
    "elastic membership (shrink, revoke, grow) is not implemented yet in actorcc's NCCL library; make a new "
    "communicator with ncclCommInitRank or ncclCommSplit instead";
}  // namespace

extern "C" ncclResult_t ncclCommShrink(ncclComm_t comm, int*, int, ncclComm_t* newcomm, ncclConfig_t*, int) {
  if (newcomm) *newcomm = nullptr;
  return refuse(comm, "ncclCommShrink", kElastic);
}
ACTORCC_NCCL_ALIAS(ncclCommShrink)

extern "C" ncclResult_t ncclCommRevoke(ncclComm_t comm, int) { return refuse(comm, "ncclCommRevoke", kElastic); }
ACTORCC_NCCL_ALIAS(ncclCommRevoke)

extern "C" ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId*) {
  return refuse(comm, "ncclCommGetUniqueId", kElastic);
}
ACTORCC_NCCL_ALIAS(ncclCommGetUniqueId)

extern "C" ncclResult_t ncclCommGrow(ncclComm_t comm, int, const ncclUniqueId*, int, ncclComm_t* newcomm,
                                     ncclConfig_t*) {
  if (newcomm) *newcomm = nullptr;
  return refuse(comm, "ncclCommGrow", kElastic);
}
ACTORCC_NCCL_ALIAS(ncclCommGrow)

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

// NCCL rereads NCCL_DEBUG here; actorcc's logging reads ACTORCC_LOG once, and there is nothing to
// reload (a void function: it cannot report anything).
extern "C" void ncclResetDebugInit() {}
ACTORCC_NCCL_ALIAS(ncclResetDebugInit)
