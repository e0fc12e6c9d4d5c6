// Version, unique ids and communicator creation: ncclGetVersion, ncclGetUniqueId,
// ncclCommInitRank(Config|Scalable), ncclCommInitAll. An init inside a group completes at
// ncclGroupEnd; a nonblocking one (config.blocking = 0) runs on its own thread and reports
// through ncclCommGetAsyncError.
#include <cstring>
#include <iomanip>

#include "comm.hpp"
#include "common/log.hpp"

namespace actorcc::ncclabi {

static_assert(sizeof(UniqueId) <= sizeof(ncclUniqueId), "actorcc's UniqueId must fit in an ncclUniqueId");

Options comm_options(int device) {
  Options o;
  // A rank on a GPU uses the device that was current when init was called, even when the
  // init itself runs on another thread (a group's end, a nonblocking init).
  o.device = device;
  if (device < 0) o.backend = Backend::Cpu;
  return o;
}

ncclComm* new_comm(const CommConfig& cfg) {
  auto* c = new ncclComm();
  c->blocking = cfg.blocking;
  return c;
}

void run_init(ncclComm* comm, const std::function<std::unique_ptr<Communicator>()>& make, const char* fn) noexcept {
  try {
    std::unique_ptr<Communicator> core = make();
    comm->rank = core->rank();
    comm->nranks = core->world_size();
    comm->cuda_device = core->device();
    comm->adapt = make_adapt_state(*core);
    comm->ready_at = std::chrono::steady_clock::now();
    comm->owned = std::move(core);
    comm->core.store(comm->owned.get(), std::memory_order_release);
    comm->async_state.store(ncclSuccess, std::memory_order_release);
  } catch (...) {
    comm->async_state.store(fail_current(comm, fn), std::memory_order_release);
  }
}

void note_first_call(ncclComm* comm, const char* fn) noexcept {
  if (comm->called.exchange(true, std::memory_order_relaxed)) return;
  try {
    using Ms = std::chrono::duration<double, std::milli>;
    const double ms = Ms(std::chrono::steady_clock::now() - comm->ready_at).count();
    LOG_INFO(fn << ": rank " << comm->rank << " of " << comm->nranks << ": the communicator's first call, "
                << std::fixed << std::setprecision(1) << ms << " ms after its init returned");
  } catch (...) {  // a note is never worth failing the call
  }
}

namespace {
// The thread of a nonblocking init. When the comm was abandoned (destroyed or aborted while
// this ran), the thread frees it.
void init_thread_main(ncclComm* comm, std::function<std::unique_ptr<Communicator>()> make, const char* fn) {
  run_init(comm, make, fn);
  bool free_it = false;
  {
    std::lock_guard<std::mutex> g(comm->init_mu);
    comm->init_running = false;
    free_it = comm->abandoned;
  }
  if (free_it) {
    if (comm->init_thread.joinable()) comm->init_thread.detach();
    if (auto* c = comm->core.load()) c->abort("ncclCommDestroy or ncclCommAbort was called during init");
    delete comm;
  }
}

void start_init_thread(ncclComm* comm, std::function<std::unique_ptr<Communicator>()> make, const char* fn) {
  std::lock_guard<std::mutex> g(comm->init_mu);
  comm->init_running = true;
  comm->init_thread = std::thread(init_thread_main, comm, std::move(make), fn);
}
}  // namespace

ncclResult_t launch_init(ncclComm* comm, std::function<std::unique_ptr<Communicator>()> make, const char* fn) {
  // An init that runs on another thread runs on the device current here (NCCL's rule).
  const int device = current_device();
  auto on_device = [device, make = std::move(make)] {
    set_device(device);
    return make();
  };
  if (in_group()) {
    // Both kinds start at ncclGroupEnd: several inits of one thread must meet concurrently.
    defer_init(comm, [comm, on_device, fn]() mutable {
      if (comm->blocking) run_init(comm, on_device, fn);
      else start_init_thread(comm, std::move(on_device), fn);
    });
    return ncclSuccess;
  }
  if (!comm->blocking) {
    start_init_thread(comm, std::move(on_device), fn);
    return ncclInProgress;
  }
  run_init(comm, on_device, fn);
  return static_cast<ncclResult_t>(comm->async_state.load(std::memory_order_acquire));
}

ncclResult_t launch_child(ncclComm* parent, ncclComm* child, ncclComm_t* newcomm,
                          std::function<std::unique_ptr<Communicator>()> make, const char* fn) {
  *newcomm = child;
  const ncclResult_t r = launch_init(child, std::move(make), fn);
  if (r == ncclSuccess || r == ncclInProgress) return r;
  const std::string why = child->last_error;
  *newcomm = nullptr;
  release_comm(child);
  return set_error(parent, r, why);
}

ncclResult_t wait_init(ncclComm* comm, const char* fn) noexcept {
  // Joined outside the lock: the init thread takes it when it ends.
  std::thread t;
  {
    std::lock_guard<std::mutex> g(comm->init_mu);
    if (comm->init_thread.joinable() && comm->init_thread.get_id() != std::this_thread::get_id())
      t = std::move(comm->init_thread);
  }
  if (t.joinable()) t.join();
  const int s = comm->async_state.load(std::memory_order_acquire);
  return static_cast<ncclResult_t>(s);
}

void release_comm(ncclComm* comm) noexcept {
  {
    std::lock_guard<std::mutex> g(comm->init_mu);
    if (comm->init_running) {
      comm->abandoned = true;  // the init thread frees it when the join ends
      return;
    }
  }
  if (comm->init_thread.joinable()) comm->init_thread.join();
  if (comm->grow_id) {
    try {
      comm->grow_id->stop_root_if_unused();  // an ncclCommGetUniqueId that no grow consumed
    } catch (...) {
    }
  }
  comm->magic = 0;
  comm->core.store(nullptr);
  comm->adapt.reset();
  comm->owned.reset();
  delete comm;
}

Communicator* ready_core_slow(ncclComm* comm, const char* fn, ncclResult_t* rc) noexcept {
  if (!valid(comm)) {
    *rc = bad_comm(fn, comm);
    return nullptr;
  }
  if (comm->closing.load(std::memory_order_acquire)) {
    *rc = set_error(comm, ncclInvalidUsage,
                    std::string(fn) + ": " + rank_prefix(comm) +
                        (comm->revoked.load(std::memory_order_acquire)
                             ? "the communicator was revoked (ncclCommRevoke or ncclCommShrink): destroy it, or shrink it"
                             : "the communicator was aborted"));
    return nullptr;
  }
  if (Communicator* c = comm->core.load(std::memory_order_acquire)) return c;
  // Not ready: a nonblocking init still running (wait for it, as a call on it must), or a
  // failed one, or an init deferred to a group end that has not come.
  const ncclResult_t s = wait_init(comm, fn);
  if (Communicator* c = comm->core.load(std::memory_order_acquire)) return c;
  if (s == ncclInProgress)
    *rc = set_error(comm, ncclInvalidUsage,
                    std::string(fn) + ": the communicator's init has not run yet (it completes at ncclGroupEnd)");
  else
    *rc = set_error(comm, s, std::string(fn) + ": the communicator's init failed: " + comm->last_error);
  return nullptr;
}

ncclResult_t init_rank(ncclComm** out, int nranks, const ncclUniqueId& nid, int rank, const ncclConfig_t* config,
                       const char* fn) {
  return guarded(nullptr, fn, [&] {
    if (!out) return set_error(nullptr, ncclInvalidArgument, std::string(fn) + ": newcomm is NULL");
    *out = nullptr;
    if (nranks < 1 || rank < 0 || rank >= nranks)
      return set_error(nullptr, ncclInvalidArgument,
                       std::string(fn) + ": rank " + std::to_string(rank) + " of nranks " + std::to_string(nranks) +
                           " (0 <= rank < nranks)");
    CommConfig cfg;
    if (ncclResult_t r = parse_config(config, &cfg, fn); r != ncclSuccess) return r;
    UniqueId id;
    std::memcpy(id.bytes.data(), nid.internal, id.bytes.size());
    ncclComm* comm = new_comm(cfg);
    comm->rank = rank;
    comm->nranks = nranks;
    *out = comm;
    const Options opt = comm_options(current_device());
    return launch_init(comm, [id, rank, nranks, opt] { return std::make_unique<Communicator>(id, rank, nranks, opt); },
                       fn);
  });
}

}  // namespace actorcc::ncclabi

using namespace actorcc;
using namespace actorcc::ncclabi;

extern "C" ncclResult_t ncclGetVersion(int* version) {
  if (!version) return set_error(nullptr, ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = kNcclVersionCode;
  return ncclSuccess;
}
ACTORCC_NCCL_ALIAS(ncclGetVersion)

extern "C" const char* ncclActorccVersion() { return actorcc::version(); }

extern "C" ncclResult_t ncclGetUniqueId(ncclUniqueId* out) {
  return guarded(nullptr, "ncclGetUniqueId", [&] {
    if (!out) return set_error(nullptr, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    const auto t0 = std::chrono::steady_clock::now();
    const UniqueId id = UniqueId::create();  // starts the group's root in this process
    using Ms = std::chrono::duration<double, std::milli>;
    const double ms = Ms(std::chrono::steady_clock::now() - t0).count();
    LOG_DEBUG("ncclGetUniqueId: the group's root started in " << ms << " ms");
    std::memset(out->internal, 0, sizeof out->internal);
    std::memcpy(out->internal, id.bytes.data(), id.bytes.size());
    return ncclSuccess;
  });
}
ACTORCC_NCCL_ALIAS(ncclGetUniqueId)


extern "C" ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return init_rank(comm, nranks, commId, rank, nullptr, "ncclCommInitRank");
}
ACTORCC_NCCL_ALIAS(ncclCommInitRank)

extern "C" ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                               ncclConfig_t* config) {
  return init_rank(comm, nranks, commId, rank, config, "ncclCommInitRankConfig");
}
ACTORCC_NCCL_ALIAS(ncclCommInitRankConfig)

// Several ids only spread NCCL's bootstrap over several roots; actorcc's root serves the whole
// group, so the first id is used and the others are ignored (they are still valid ids).
extern "C" ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                 ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || !commIds)
    return set_error(nullptr, ncclInvalidArgument, "ncclCommInitRankScalable: needs nId >= 1 ids, got " +
                                                       std::to_string(nId) + (commIds ? "" : " (commIds is NULL)"));
  const ncclResult_t rc = init_rank(newcomm, nranks, commIds[0], myrank, config, "ncclCommInitRankScalable");
  // The other ids' roots will never be joined: the process that hosts one stops it (a no-op
  // elsewhere).
  for (int i = 1; i < nId; ++i) {
    if (std::memcmp(commIds[i].internal, commIds[0].internal, sizeof(UniqueId)) == 0) continue;
    UniqueId unused;
    std::memcpy(unused.bytes.data(), commIds[i].internal, unused.bytes.size());
    try {
      unused.stop_root_if_unused();
    } catch (...) {
    }
  }
  return rc;
}
ACTORCC_NCCL_ALIAS(ncclCommInitRankScalable)

// One process, ndev ranks: one thread per rank joins a fresh group (devlist[i], else device i).
extern "C" ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return guarded(nullptr, "ncclCommInitAll", [&] {
    if (!comms || ndev < 1)
      return set_error(nullptr, ncclInvalidArgument, "ncclCommInitAll: needs comms and ndev >= 1, got ndev " +
                                                         std::to_string(ndev));
    const UniqueId id = UniqueId::create();
    const bool gpu = current_device() >= 0;
    std::vector<ncclComm*> made(ndev);
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i) {
      made[i] = new_comm(CommConfig{});
      made[i]->rank = i;
      made[i]->nranks = ndev;
      const Options opt = comm_options(gpu ? (devlist ? devlist[i] : i) : -1);
      threads.emplace_back([&, i, opt] {
        set_device(opt.device);
        run_init(made[i], [&] { return std::make_unique<Communicator>(id, i, ndev, opt); }, "ncclCommInitAll");
      });
    }
    for (auto& t : threads) t.join();
    ncclResult_t rc = ncclSuccess;
    for (int i = 0; i < ndev; ++i) {
      const auto s = static_cast<ncclResult_t>(made[i]->async_state.load());
      if (s != ncclSuccess && rc == ncclSuccess) rc = set_error(nullptr, s, "ncclCommInitAll: " + made[i]->last_error);
    }
    if (rc != ncclSuccess) {
      for (ncclComm* c : made) release_comm(c);
      return rc;
    }
    for (int i = 0; i < ndev; ++i) comms[i] = made[i];
    return ncclSuccess;
  });
}
ACTORCC_NCCL_ALIAS(ncclCommInitAll)
