// ncclCommSuspend, ncclCommResume, ncclCommMemStats (NCCL 2.29): over Communicator::suspend /
// resume / mem_stats, which release the CUDA backend's VMM workspace (and this process's
// mappings of every peer's) or the CPU mode's shared segment, and make them again. As in NCCL:
// suspend is collective and needs no call in flight; without NCCL_SUSPEND_MEM it releases
// nothing; a second suspend, or a resume of a comm that is not suspended, is ncclInvalidUsage;
// calls while suspended fail with ncclInvalidUsage, saying so.
#include "comm.hpp"

namespace {

using namespace actorcc::ncclabi;

constexpr int kNcclSuspendMem = 0x01;  // NCCL_SUSPEND_MEM
// ncclCommMemStat_t.
enum : int { kStatGpuMemSuspend = 0, kStatGpuMemSuspended = 1, kStatGpuMemPersist = 2, kStatGpuMemTotal = 3 };

// The comm's Communicator for a suspend or resume, or null with *rc set: the host-side step
// cannot run between ncclGroupStart and ncclGroupEnd, where the group's calls are still to run.
actorcc::Communicator* suspend_core(ncclComm* comm, const char* fn, ncclResult_t* rc) {
  actorcc::Communicator* c = ready_core(comm, fn, rc);
  if (c && comm->in_group) {
    *rc = set_error(comm, ncclInvalidUsage,
                    std::string(fn) + ": " + rank_prefix(comm) +
                        "called between ncclGroupStart and ncclGroupEnd; call it outside the group, after the "
                        "group's calls");
    return nullptr;
  }
  return c;
}

}  // namespace

extern "C" ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  ncclResult_t rc = ncclSuccess;
  actorcc::Communicator* c = suspend_core(comm, "ncclCommSuspend", &rc);
  if (!c) return rc;
  if (!(flags & kNcclSuspendMem)) return ncclSuccess;  // NCCL releases nothing either
  BusyScope busy(comm, "ncclCommSuspend");
  return guarded(comm, "ncclCommSuspend", [&] {
    c->suspend();
    return ncclSuccess;
  });
}
ACTORCC_NCCL_ALIAS(ncclCommSuspend)

extern "C" ncclResult_t ncclCommResume(ncclComm_t comm) {
  ncclResult_t rc = ncclSuccess;
  actorcc::Communicator* c = suspend_core(comm, "ncclCommResume", &rc);
  if (!c) return rc;
  BusyScope busy(comm, "ncclCommResume");
  return guarded(comm, "ncclCommResume", [&] {
    c->resume();
    return ncclSuccess;
  });
}
ACTORCC_NCCL_ALIAS(ncclCommResume)

extern "C" ncclResult_t ncclCommMemStats(ncclComm_t comm, int stat, uint64_t* value) {
  ncclResult_t rc = ncclSuccess;
  actorcc::Communicator* c = ready_core(comm, "ncclCommMemStats", &rc);
  if (!c) return rc;
  if (!value) return set_error(comm, ncclInvalidArgument, "ncclCommMemStats: " + rank_prefix(comm) + "value is NULL");
  return guarded(comm, "ncclCommMemStats", [&] {
    const actorcc::MemoryStats m = c->mem_stats();
    switch (stat) {
      case kStatGpuMemSuspend: *value = m.suspendable_bytes; return ncclSuccess;
      case kStatGpuMemSuspended: *value = m.suspended ? 1 : 0; return ncclSuccess;
      case kStatGpuMemPersist: *value = m.persistent_bytes; return ncclSuccess;
      case kStatGpuMemTotal: *value = m.total_bytes(); return ncclSuccess;
      default: break;
    }
    return set_error(comm, ncclInvalidArgument,
                     "ncclCommMemStats: " + rank_prefix(comm) + "unknown ncclCommMemStat_t " + std::to_string(stat) +
                         " (0-3: GpuMemSuspend, GpuMemSuspended, GpuMemPersist, GpuMemTotal)");
  });
}
ACTORCC_NCCL_ALIAS(ncclCommMemStats)
