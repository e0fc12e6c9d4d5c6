// Communicator management: ncclCommSplit, ncclCommFinalize, ncclCommDestroy, ncclCommAbort,
// ncclCommGetAsyncError, ncclCommCount, ncclCommCuDevice, ncclCommUserRank.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <tuple>

#include "comm.hpp"

namespace actorcc::ncclabi {

namespace {

// The split's two rounds over the parent's bootstrap: every rank (NOCOLOR included) shares its
// color and key; then each color's lowest new rank creates a fresh UniqueId (its root lives in
// that process) and shares it. The members then join that fresh group. Returns null for NOCOLOR.
std::unique_ptr<Communicator> split_core(Communicator& parent, int color, int key, const Options& opt) {
  int mine[2] = {color, key};
  const auto round1 = parent.allgather_bytes(std::string(reinterpret_cast<const char*>(mine), sizeof mine));
  std::vector<std::tuple<int, int>> members;  // (key, parent rank) of this rank's color
  for (int r = 0; r < static_cast<int>(round1.size()); ++r) {
    int theirs[2];
    if (round1[r].size() != sizeof theirs)
      throw Error(ErrorCode::Internal, "ncclCommSplit: rank " + std::to_string(r) + " sent a malformed split blob",
                  parent.rank(), r);
    std::memcpy(theirs, round1[r].data(), sizeof theirs);
    if (color != kNcclSplitNoColor && theirs[0] == color) members.emplace_back(theirs[1], r);
  }
  std::sort(members.begin(), members.end());
  int new_rank = -1;
  for (size_t i = 0; i < members.size(); ++i)
    if (std::get<1>(members[i]) == parent.rank()) new_rank = static_cast<int>(i);
  std::string blob;
  if (new_rank == 0) {
    const UniqueId id = UniqueId::create();
    blob.assign(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size());
  }
  const auto round2 = parent.allgather_bytes(blob);
  if (color == kNcclSplitNoColor) return nullptr;
  const std::string& leader = round2[std::get<1>(members[0])];
  UniqueId id;
  if (leader.size() != id.bytes.size())
    throw Error(ErrorCode::Internal, "ncclCommSplit: the new group's first rank sent no id", parent.rank());
  std::memcpy(id.bytes.data(), leader.data(), id.bytes.size());
  return std::make_unique<Communicator>(id, new_rank, static_cast<int>(members.size()), opt);
}

}  // namespace

}  // namespace actorcc::ncclabi

using namespace actorcc;
using namespace actorcc::ncclabi;

extern "C" ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* fn = "ncclCommSplit";
  if (!valid(comm)) return bad_comm(fn, comm);
  return guarded(comm, fn, [&]() -> ncclResult_t {
    // The other ranks take part in the same rounds over the parent: a bad argument here must
    // reach them (refuse_argument), or they would wait for this rank until the call timeout.
    if (!newcomm) return refuse_argument(comm, fn, "newcomm is NULL");
    *newcomm = nullptr;
    if (color < 0 && color != kNcclSplitNoColor)
      return refuse_argument(comm, fn, "color " + std::to_string(color) + " (>= 0, or NCCL_SPLIT_NOCOLOR)");
    CommConfig cfg;
    cfg.blocking = comm->blocking;  // NULL config: inherit the parent's
    if (config) {
      if (std::string bad = read_config(config, &cfg); !bad.empty()) return refuse_argument(comm, fn, bad);
    }
    ncclResult_t rc = ncclSuccess;
    if (!in_group() && !ready_core(comm, fn, &rc)) return rc;
    const Options opt = comm_options(comm->cuda_device);
    ncclComm* child = color == kNcclSplitNoColor ? nullptr : new_comm(cfg);
    auto make = [comm, color, key, opt, fn]() -> std::unique_ptr<Communicator> {
      ncclResult_t rc2 = ncclSuccess;
      Communicator* parent = ready_core(comm, fn, &rc2);
      if (!parent) throw Error(ErrorCode::InvalidArgument, comm->last_error, comm->rank);
      BusyScope busy(comm, fn);
      return split_core(*parent, color, key, opt);
    };
    if (!child) {
      // NOCOLOR still takes part in the parent's two rounds.
      if (in_group()) {
        defer_init(nullptr, [make] { make(); });
        return ncclSuccess;
      }
      make();
      return ncclSuccess;
    }
    return launch_child(comm, child, newcomm, make, fn);
  });
}
ACTORCC_NCCL_ALIAS(ncclCommSplit)

// NCCL's finalize flushes the comm's outstanding work. Ours is on the callers' streams (the CUDA
// backend) or already done (the CPU backend): finalize waits for the last stream this comm was
// used on and reports the comm's error state.
extern "C" ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  const char* fn = "ncclCommFinalize";
  ncclResult_t rc = ncclSuccess;
  Communicator* c = ready_core(comm, fn, &rc);
  if (!c) return rc;
  BusyScope busy(comm, fn);
  return guarded(comm, fn, [&] {
    finish_device_work(comm->cuda_device, c->rank());
    c->check();
    return ncclSuccess;
  });
}
ACTORCC_NCCL_ALIAS(ncclCommFinalize)

// Inside a group the comm is freed at the group's end, after the group's deferred inits and
// calls (NCCL queues its destroy there too): freeing it now would leave them to run on freed memory.
extern "C" ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;  // NCCL accepts NULL here
  if (!valid(comm)) return bad_comm("ncclCommDestroy", comm);
  if (in_group()) return defer_release(comm, false, "ncclCommDestroy");
  release_comm(comm);
  return ncclSuccess;
}
ACTORCC_NCCL_ALIAS(ncclCommDestroy)

void actorcc::ncclabi::abort_comm(ncclComm* comm) noexcept {
  comm->closing.store(true, std::memory_order_release);
  if (Communicator* c = comm->core.load(std::memory_order_acquire)) {
    try {
      if (!c->aborted()) c->abort("ncclCommAbort called");
    } catch (...) {
      fail_current(comm, "ncclCommAbort");
    }
    while (comm->busy.load(std::memory_order_acquire) > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// May run on another thread while this comm's calls wait (torch's watchdog does): aborting the
// group makes those calls return (their waits check the group's abort), then the comm is freed
// once none of them is still inside. Inside a group the abort happens now (as NCCL raises its
// abort flags at once), so the comm's deferred calls are refused at the group's end, and the
// comm is freed there, after them (a deferred init still runs and joins, so that its peers hear
// of the abort rather than wait for it).
extern "C" ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  if (!valid(comm)) return bad_comm("ncclCommAbort", comm);
  if (in_group()) {
    const ncclResult_t rc = defer_release(comm, true, "ncclCommAbort");
    if (rc == ncclSuccess) abort_comm(comm);
    return rc;
  }
  abort_comm(comm);
  release_comm(comm);
  return ncclSuccess;
}
ACTORCC_NCCL_ALIAS(ncclCommAbort)

// Cheap and thread-safe: no synchronisation, only the group's error state (Communicator::check:
// a timed-out, killed, stalled, aborted or mismatched peer), sticky once set.
extern "C" ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (!valid(comm)) return bad_comm("ncclCommGetAsyncError", comm);
  if (!asyncError) return set_error(comm, ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  const int s = comm->async_state.load(std::memory_order_acquire);
  if (s != ncclSuccess) {
    *asyncError = static_cast<ncclResult_t>(s);
    return ncclSuccess;
  }
  Communicator* c = comm->core.load(std::memory_order_acquire);
  try {
    if (c && !comm->closing.load(std::memory_order_acquire)) c->check();
    *asyncError = ncclSuccess;
  } catch (...) {
    const ncclResult_t code = fail_current(comm, "ncclCommGetAsyncError");
    int expected = ncclSuccess;
    comm->async_state.compare_exchange_strong(expected, code);
    *asyncError = static_cast<ncclResult_t>(comm->async_state.load());
  }
  return ncclSuccess;
}
ACTORCC_NCCL_ALIAS(ncclCommGetAsyncError)

namespace {
template <typename F>
ncclResult_t query(ncclComm* comm, int* out, const char* fn, F get) noexcept {
  if (!valid(comm)) return bad_comm(fn, comm);
  if (!out) return set_error(comm, ncclInvalidArgument, std::string(fn) + ": output pointer is NULL");
  ncclResult_t rc = ncclSuccess;
  if (!ready_core(comm, fn, &rc)) return rc;
  *out = get(comm);
  return ncclSuccess;
}
}  // namespace

extern "C" ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return query(comm, count, "ncclCommCount", [](ncclComm* c) { return c->nranks; });
}
ACTORCC_NCCL_ALIAS(ncclCommCount)

// The CUDA device the comm runs on (-1 in the CPU-only mode), not its rank.
extern "C" ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return query(comm, device, "ncclCommCuDevice", [](ncclComm* c) { return c->cuda_device; });
}
ACTORCC_NCCL_ALIAS(ncclCommCuDevice)

extern "C" ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return query(comm, rank, "ncclCommUserRank", [](ncclComm* c) { return c->rank; });
}
ACTORCC_NCCL_ALIAS(ncclCommUserRank)
