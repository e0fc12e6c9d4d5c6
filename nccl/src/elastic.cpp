// Elastic membership in NCCL's terms, over the core's shrink and grow (docs/elastic.md):
// ncclCommShrink (2.27; NCCL_SHRINK_DEFAULT and NCCL_SHRINK_ABORT), ncclCommRevoke (2.28.7),
// ncclCommGetUniqueId and ncclCommGrow (2.29.2's calling convention). The new communicators are
// made like every other (launch_init): at ncclGroupEnd inside a group, on a thread when the
// config asks for a nonblocking one, else now; a NULL config inherits the parent's.
#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>

#include "comm.hpp"

namespace actorcc::ncclabi {

namespace {

// The parent's Communicator for a shrink: a revoked comm may still be shrunk (NCCL's rule: a
// revoked communicator is quiescent and safe to destroy, split or shrink).
Communicator* parent_core(ncclComm* comm, const char* fn, ncclResult_t* rc) noexcept {
  if (comm->revoked.load(std::memory_order_acquire))
    if (Communicator* c = comm->core.load(std::memory_order_acquire)) return c;
  return ready_core(comm, fn, rc);
}

// Ends this comm's in-flight calls and refuses its later ones (ncclCommRevoke, and
// NCCL_SHRINK_ABORT before its shrink). The group is aborted, not only this rank: a peer's call
// waiting on this rank would otherwise wait until its timeout, and the ranks that will shrink
// must not wait for a dead one. Returns once no call of this comm is inside the library.
void revoke_in_flight(ncclComm* comm, Communicator& c, const std::string& why) {
  comm->revoked.store(true, std::memory_order_release);
  comm->closing.store(true, std::memory_order_release);
  c.abort(why);
  while (comm->busy.load(std::memory_order_acquire) > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// A child's config as ncclCommInitRankConfig reads it; NULL inherits the parent's `blocking`.
// Returns what is wrong with it (empty when nothing is).
std::string child_config(const ncclComm* parent, const ncclConfig_t* config, CommConfig* cfg) {
  *cfg = CommConfig{};
  cfg->blocking = parent->blocking;
  return config ? read_config(config, cfg) : std::string();
}

// ncclComm::shrink_state: a second shrink while one runs is refused (it would race the first over
// the parent's membership), and so is a shrink of a parent that a shrink has already replaced.
enum ShrinkState : int { kShrinkIdle = 0, kShrinkRunning = 1, kShrinkDone = 2 };

// A shrink's hold on its parent, from its checks until its init has run (settle), whichever
// thread that is on, or was dropped without running (ncclGroupSimulateEnd: the destructor gives
// it back). Settled inside the init, before the child reports ready: a caller may destroy the
// parent as soon as it sees the child ready, so nothing touches the parent after that.
class ShrinkClaim {
 public:
  explicit ShrinkClaim(ncclComm* parent) noexcept : parent_(parent) {}
  ~ShrinkClaim() {
    if (!settled_) parent_->shrink_state.store(kShrinkIdle, std::memory_order_release);
  }
  ShrinkClaim(const ShrinkClaim&) = delete;
  ShrinkClaim& operator=(const ShrinkClaim&) = delete;
  // formed: the shrunk group exists (the parent is replaced); else the claim is given back, and
  // a failed shrink may be retried.
  void settle(bool formed) noexcept {
    settled_ = true;
    parent_->shrink_state.store(formed ? kShrinkDone : kShrinkIdle, std::memory_order_release);
  }

 private:
  ncclComm* parent_;
  bool settled_ = false;
};

std::string prefix(const char* fn, const ncclComm* comm) { return std::string(fn) + ": " + rank_prefix(comm); }

}  // namespace

}  // namespace actorcc::ncclabi

using namespace actorcc;
using namespace actorcc::ncclabi;

// Every survivor calls it with the same list; excluded ranks do not call it. New ranks are the
// survivors in parent order. NCCL_SHRINK_ABORT first revokes the parent (its in-flight calls end
// on every rank) and never waits for an excluded rank; so does NCCL_SHRINK_DEFAULT, which only
// does not abort the parent's calls first (the core's shrink never waits for the dead). Either
// way the parent is revoked once the shrunk group has formed; destroy it. Every argument is
// checked before anything changes: a refused shrink leaves the parent as it was, except that a
// bad argument the other survivors would wait on is told to them (refuse_argument).
extern "C" ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                       ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  const char* fn = "ncclCommShrink";
  if (!valid(comm)) return bad_comm(fn, comm);
  return guarded(comm, fn, [&]() -> ncclResult_t {
    if (!newcomm) return refuse_argument(comm, fn, "newcomm is NULL");
    *newcomm = nullptr;
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
      return refuse_argument(comm, fn,
                             "excludeRanksList holds " + std::to_string(excludeRanksCount) + " ranks but is " +
                                 (excludeRanksList ? "set" : "NULL"));
    if (shrinkFlags != kNcclShrinkDefault && shrinkFlags != kNcclShrinkAbort)
      return refuse_argument(comm, fn,
                             "shrinkFlags " + std::to_string(shrinkFlags) + " (NCCL_SHRINK_DEFAULT 0 or NCCL_SHRINK_ABORT 1)");
    CommConfig cfg;
    if (std::string bad = child_config(comm, config, &cfg); !bad.empty()) return refuse_argument(comm, fn, bad);
    ncclResult_t rc = ncclSuccess;
    Communicator* parent = parent_core(comm, fn, &rc);
    if (!parent) return rc;
    const std::vector<int> exclude(excludeRanksList, excludeRanksList + excludeRanksCount);
    for (int r : exclude)
      if (r < 0 || r >= comm->nranks)
        return refuse_argument(comm, fn,
                               "excludeRanksList holds rank " + std::to_string(r) + ", outside the group of " +
                                   std::to_string(comm->nranks));
    // An excluded rank takes no part in the others' shrink (they do not wait for it), so its
    // call is refused here alone, the parent left as it was.
    if (std::find(exclude.begin(), exclude.end(), comm->rank) != exclude.end())
      return set_error(comm, ncclInvalidArgument,
                       prefix(fn, comm) + "this rank is in the exclude list: an excluded rank does not call "
                                          "ncclCommShrink (the survivors' shrink revokes its communicator: destroy it)");
    int idle = kShrinkIdle;
    if (!comm->shrink_state.compare_exchange_strong(idle, kShrinkRunning, std::memory_order_acq_rel))
      return idle == kShrinkRunning
                 ? set_error(comm, ncclInvalidUsage,
                             prefix(fn, comm) + "another ncclCommShrink of this communicator is in progress (one "
                                                "shrink at a time; this call changed nothing)")
                 : set_error(comm, ncclInvalidArgument,
                             prefix(fn, comm) + "this communicator was shrunk already: shrink the communicator that "
                                                "ncclCommShrink returned");
    auto claim = std::make_shared<ShrinkClaim>(comm);
    if (shrinkFlags == kNcclShrinkAbort && !comm->revoked.load(std::memory_order_acquire))
      revoke_in_flight(comm, *parent, "ncclCommShrink(NCCL_SHRINK_ABORT) revoked the parent communicator");
    return launch_child(comm, new_comm(cfg), newcomm, [comm, parent, exclude, claim] {
      BusyScope busy(comm, "ncclCommShrink");
      try {
        std::unique_ptr<Communicator> shrunk = parent->shrink(exclude);
        claim->settle(true);
        return shrunk;
      } catch (...) {
        claim->settle(false);
        throw;
      }
    }, fn);
  });
}
ACTORCC_NCCL_ALIAS(ncclCommShrink)

// NCCL's revoke: in-flight and later calls stop, the comm stays to be destroyed or shrunk. Here
// the group is aborted (the other ranks' calls fail naming this rank, rather than waiting for
// it); once this rank has no call left inside, ncclCommGetAsyncError says ncclSuccess (quiescent)
// and later calls are refused with ncclInvalidUsage.
extern "C" ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  const char* fn = "ncclCommRevoke";
  if (!comm) return ncclSuccess;  // as NCCL
  if (!valid(comm)) return bad_comm(fn, comm);
  return guarded(comm, fn, [&]() -> ncclResult_t {
    if (revokeFlags != kNcclRevokeDefault)
      return set_error(comm, ncclInvalidArgument,
                       prefix(fn, comm) + "revokeFlags " + std::to_string(revokeFlags) +
                           " (must be NCCL_REVOKE_DEFAULT, 0)");
    if (comm->revoked.load(std::memory_order_acquire))
      return set_error(comm, ncclInvalidArgument, prefix(fn, comm) + "the communicator is revoked already");
    ncclResult_t rc = ncclSuccess;
    Communicator* c = ready_core(comm, fn, &rc);
    if (!c) return rc;
    revoke_in_flight(comm, *c, "ncclCommRevoke revoked the communicator");
    comm->async_state.store(ncclSuccess, std::memory_order_release);
    return ncclSuccess;
  });
}
ACTORCC_NCCL_ALIAS(ncclCommRevoke)

// One rank of the existing group (the coordinator) makes the grow's id; its root lives in this
// process. Not collective. One id at a time: the next ncclCommGrow on this comm consumes it.
extern "C" ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  const char* fn = "ncclCommGetUniqueId";
  if (!valid(comm)) return bad_comm(fn, comm);
  return guarded(comm, fn, [&]() -> ncclResult_t {
    if (!uniqueId) return set_error(comm, ncclInvalidArgument, prefix(fn, comm) + "uniqueId is NULL");
    ncclResult_t rc = ncclSuccess;
    Communicator* c = ready_core(comm, fn, &rc);
    if (!c) return rc;
    std::lock_guard<std::mutex> g(comm->grow_mu);
    if (comm->grow_id)
      return set_error(comm, ncclInvalidUsage,
                       prefix(fn, comm) + "the id an earlier ncclCommGetUniqueId made has not been consumed by "
                                          "ncclCommGrow yet (one grow id at a time)");
    comm->grow_id = c->grow_id();
    std::memset(uniqueId->internal, 0, sizeof uniqueId->internal);
    std::memcpy(uniqueId->internal, comm->grow_id->bytes.data(), comm->grow_id->bytes.size());
    return ncclSuccess;
  });
}
ACTORCC_NCCL_ALIAS(ncclCommGetUniqueId)

// 2.29's convention. Existing ranks: comm, rank -1 (they keep their ranks), uniqueId NULL except
// on the coordinator, which passes the id (or NULL: its comm remembers the id it made). New ranks:
// comm NULL, the id, their rank (from the parent's size up). Collective over the existing group
// plus the new ranks; the parent stays usable (destroy it once the grown comm is ready).
extern "C" ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                     ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* fn = "ncclCommGrow";
  if (!comm) {
    if (newcomm) *newcomm = nullptr;
    if (!uniqueId)
      return set_error(nullptr, ncclInvalidArgument,
                       std::string(fn) + ": a new rank (comm NULL) passes the id the coordinator's "
                                         "ncclCommGetUniqueId made; uniqueId is NULL");
    return init_rank(newcomm, nRanks, *uniqueId, rank, config, fn);
  }
  if (!valid(comm)) return bad_comm(fn, comm);
  return guarded(comm, fn, [&]() -> ncclResult_t {
    // The existing ranks meet over the parent first: a bad argument must reach them.
    if (!newcomm) return refuse_argument(comm, fn, "newcomm is NULL");
    *newcomm = nullptr;
    if (rank != -1)
      return refuse_argument(comm, fn, "an existing rank keeps its rank and passes rank -1, got " + std::to_string(rank));
    CommConfig cfg;
    if (std::string bad = child_config(comm, config, &cfg); !bad.empty()) return refuse_argument(comm, fn, bad);
    ncclResult_t rc = ncclSuccess;
    Communicator* parent = ready_core(comm, fn, &rc);
    if (!parent) return rc;
    if (nRanks <= comm->nranks)
      return set_error(comm, ncclInvalidArgument,
                       prefix(fn, comm) + "nRanks " + std::to_string(nRanks) + " must exceed the current " +
                           std::to_string(comm->nranks) + " ranks");
    std::optional<UniqueId> id;
    {
      std::lock_guard<std::mutex> g(comm->grow_mu);
      if (uniqueId) {
        id.emplace();
        std::memcpy(id->bytes.data(), uniqueId->internal, id->bytes.size());
      } else {
        id = comm->grow_id;
      }
      comm->grow_id.reset();  // consumed by this grow, whatever its outcome (a failed one needs a new id)
    }
    return launch_child(comm, new_comm(cfg), newcomm, [comm, parent, nRanks, id] {
      BusyScope busy(comm, "ncclCommGrow");
      return parent->grow(nRanks, id, -1);
    }, fn);
  });
}
ACTORCC_NCCL_ALIAS(ncclCommGrow)
