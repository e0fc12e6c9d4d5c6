// The host-side helpers of NCCL's device API (nccl_device/*.h) that nccl4py binds. The device
// API itself is not served (ncclDevCommCreate refuses: its kernels read NCCL's own structures),
// so only the answers that hold without it are given:
//   teams: the world team is the communicator ({nRanks, rank, 1}); no peer is reachable by the
//     device API's load/store, rail or CFT paths, so each of those teams is this rank alone
//     ({1, 0, 1}), and a team rank maps to a world rank by NCCL's rule (rank + (r - team.rank) *
//     team.stride);
//   the logical-endpoint queries and the resource requirements feed device communicators only:
//     refused with ncclInvalidUsage, their outputs zeroed; ncclLLA2ACalcSlots answers 0 slots.
// The functions without a result code answer a zero team or -1 for a bad comm, with the error text
// set (ncclGetLastError(NULL)).
#include <cstring>

#include "comm.hpp"

using namespace actorcc::ncclabi;

namespace {
constexpr const char* kNoDeviceApi =
    "NCCL's device API (device communicators, their windows' endpoints and resources) is not served by "
    "actorcc's NCCL library";

bool known(ncclComm* comm, const char* fn) {
  if (valid(comm) && comm->rank >= 0) return true;
  bad_comm(fn, comm);
  return false;
}
ncclTeam_t self_team(ncclComm* comm, const char* fn) {
  return known(comm, fn) ? ncclTeam_t{1, 0, 1} : ncclTeam_t{0, 0, 0};
}
ncclResult_t refuse(const char* fn) { return set_error(nullptr, ncclInvalidUsage, std::string(fn) + ": " + kNoDeviceApi); }
template <typename T>
void zero(T* p) {
  if (p) std::memset(p, 0, sizeof *p);
}
}  // namespace

extern "C" ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  return known(comm, "ncclTeamWorld") ? ncclTeam_t{comm->nranks, comm->rank, 1} : ncclTeam_t{0, 0, 0};
}
ACTORCC_NCCL_ALIAS(ncclTeamWorld)
extern "C" ncclTeam_t ncclTeamLsa(ncclComm_t comm) { return self_team(comm, "ncclTeamLsa"); }
ACTORCC_NCCL_ALIAS(ncclTeamLsa)
extern "C" ncclTeam_t ncclTeamRail(ncclComm_t comm) { return self_team(comm, "ncclTeamRail"); }
ACTORCC_NCCL_ALIAS(ncclTeamRail)
extern "C" ncclTeam_t ncclTeamCft(ncclComm_t comm, int) { return self_team(comm, "ncclTeamCft"); }
ACTORCC_NCCL_ALIAS(ncclTeamCft)
extern "C" ncclTeam_t ncclTeamCftMultimem(ncclComm_t comm) { return self_team(comm, "ncclTeamCftMultimem"); }
ACTORCC_NCCL_ALIAS(ncclTeamCftMultimem)

extern "C" int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (!known(comm, "ncclTeamRankToWorld")) return -1;
  return comm->rank + (rank - team.rank) * team.stride;
}
ACTORCC_NCCL_ALIAS(ncclTeamRankToWorld)
// The LSA team is this rank alone: its LSA rank is 0, every other world rank has none (-1).
extern "C" int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (!known(comm, "ncclTeamRankToLsa")) return -1;
  return comm->rank + (rank - team.rank) * team.stride == comm->rank ? 0 : -1;
}
ACTORCC_NCCL_ALIAS(ncclTeamRankToLsa)

extern "C" ncclResult_t ncclGetMultimemDeviceLeInfo(ncclWindow_t, size_t, ncclCftLeId* leId, size_t* leOffset) {
  zero(leId), zero(leOffset);
  return refuse("ncclGetMultimemDeviceLeInfo");
}
ACTORCC_NCCL_ALIAS(ncclGetMultimemDeviceLeInfo)
extern "C" ncclResult_t ncclGetCftDeviceLeInfo(ncclWindow_t, size_t, int, ncclTeam_t, ncclCftLeId* leId,
                                               size_t* leOffset) {
  zero(leId), zero(leOffset);
  return refuse("ncclGetCftDeviceLeInfo");
}
ACTORCC_NCCL_ALIAS(ncclGetCftDeviceLeInfo)
extern "C" ncclResult_t ncclGetPeerDeviceLeInfo(ncclWindow_t, size_t, int, ncclCftLeId* leId, size_t* leOffset) {
  zero(leId), zero(leOffset);
  return refuse("ncclGetPeerDeviceLeInfo");
}
ACTORCC_NCCL_ALIAS(ncclGetPeerDeviceLeInfo)

extern "C" ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t, int, ncclLsaBarrierHandle_t* outHandle,
                                                        ncclDevResourceRequirements*) {
  zero(outHandle);
  return refuse("ncclLsaBarrierCreateRequirement");
}
ACTORCC_NCCL_ALIAS(ncclLsaBarrierCreateRequirement)
extern "C" ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t* outHandle,
                                                        ncclDevResourceRequirements*) {
  zero(outHandle);
  return refuse("ncclGinBarrierCreateRequirement");
}
ACTORCC_NCCL_ALIAS(ncclGinBarrierCreateRequirement)
extern "C" ncclResult_t ncclLLA2ACreateRequirement(int, int, ncclLLA2AHandle_t* outHandle,
                                                   ncclDevResourceRequirements*) {
  zero(outHandle);
  return refuse("ncclLLA2ACreateRequirement");
}
ACTORCC_NCCL_ALIAS(ncclLLA2ACreateRequirement)
extern "C" int ncclLLA2ACalcSlots(int, int) { return 0; }
ACTORCC_NCCL_ALIAS(ncclLLA2ACalcSlots)
