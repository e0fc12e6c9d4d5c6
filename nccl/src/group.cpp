// ncclGroupStart / ncclGroupEnd / ncclGroupSimulateEnd. The group is per thread and nests; what
// is issued inside it runs at the outermost end: first the inits (concurrently), then, per
// communicator, its collectives in issue order with its sends and receives as one
// Communicator::send_recv batch (placed where the first of them was issued). A group that holds
// calls on several communicators (one thread driving several ranks) runs each communicator's
// list on its own thread, so a synchronous call of one rank does not wait for a rank whose call
// would only be issued after it; a single communicator runs on the calling thread. Last, the
// communicators destroyed or aborted inside the group are freed.
#include <algorithm>

#include "comm.hpp"

namespace actorcc::ncclabi {

namespace {

struct GroupState {
  int depth = 0;
  std::vector<std::function<void()>> inits;
  std::vector<ncclComm*> inits_comms;
  std::vector<ncclComm*> comms;  // comms with deferred calls, in first-use order
  struct Release {
    ncclComm* comm;
    bool abort;
  };
  std::vector<Release> releases;  // ncclCommDestroy/ncclCommAbort calls, in issue order
};
thread_local GroupState t_group;

// Frees the comms released inside the group, once nothing of the group uses them any more.
void run_releases(GroupState& g) noexcept {
  for (const GroupState::Release& r : g.releases) {
    if (r.abort) abort_comm(r.comm);  // again: a core that a deferred init made is aborted too
    release_comm(r.comm);
  }
  g.releases.clear();
}

// Runs one comm's deferred calls; returns the first failure (later calls of the list are skipped:
// a failed call poisons the group, so they could only fail the same way).
ncclResult_t run_list(ncclComm* comm) noexcept {
  ncclResult_t rc = ncclSuccess;
  // The lists are cleared, not released, after the run: a comm grouped again reuses them.
  struct Clear {
    ncclComm* c;
    ~Clear() {
      c->pending.clear();
      c->pending_p2p.clear();
      c->in_group = false;
    }
  } clear{comm};
  Communicator* c = ready_core(comm, "ncclGroupEnd", &rc);
  if (!c) return rc;
  BusyScope busy(comm, "ncclGroupEnd");
  return guarded(comm, "ncclGroupEnd", [&] {
    const auto& calls = comm->pending;
    for (size_t i = 0; i <= calls.size(); ++i) {
      if (i == comm->p2p_position && !comm->pending_p2p.empty()) {
        c->send_recv(comm->pending_p2p, comm->p2p_stream);
      }
      if (i < calls.size()) run_coll(*c, comm, calls[i]);
    }
    return ncclSuccess;
  });
}

// Runs fn(i) for i in [0, n): inline for one, else one thread each, joined.
template <typename F>
void run_each(size_t n, F&& fn) {
  if (n == 1) {
    fn(0);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i) threads.emplace_back([&, i] { fn(i); });
  for (auto& t : threads) t.join();
}

}  // namespace

bool in_group() noexcept { return t_group.depth > 0; }

ncclResult_t defer_release(ncclComm* comm, bool abort, const char* fn) noexcept {
  if (comm->release_pending)
    return set_error(comm, ncclInvalidArgument,
                     std::string(fn) + ": " + rank_prefix(comm) +
                         "the communicator is already destroyed at this group's end (ncclCommDestroy or ncclCommAbort "
                         "was called on it earlier inside the group)");
  try {
    t_group.releases.push_back({comm, abort});
  } catch (...) {
    return fail_current(comm, fn);
  }
  comm->release_pending = true;
  return ncclSuccess;
}

void defer_init(ncclComm* comm, std::function<void()> job) {
  t_group.inits.push_back(std::move(job));
  t_group.inits_comms.push_back(comm);
}

static void enlist(ncclComm* comm) {
  if (!comm->in_group) {
    comm->in_group = true;
    comm->p2p_position = static_cast<size_t>(-1);
    t_group.comms.push_back(comm);
  }
}

void defer_coll(ncclComm* comm, const CollCall& call) {
  enlist(comm);
  comm->pending.push_back(call);
}

void defer_p2p(ncclComm* comm, const P2POp& op, void* stream) {
  enlist(comm);
  if (comm->pending_p2p.empty()) {
    comm->p2p_position = comm->pending.size();
    comm->p2p_stream = stream;
  }
  comm->pending_p2p.push_back(op);
}

}  // namespace actorcc::ncclabi

using namespace actorcc::ncclabi;

extern "C" ncclResult_t ncclGroupStart() {
  ++t_group.depth;
  return ncclSuccess;
}
ACTORCC_NCCL_ALIAS(ncclGroupStart)

extern "C" ncclResult_t ncclGroupEnd() {
  if (t_group.depth <= 0)
    return set_error(nullptr, ncclInvalidUsage, "ncclGroupEnd: no group is open on this thread (ncclGroupStart first)");
  if (--t_group.depth > 0) return ncclSuccess;
  // The thread's group state is run, then cleared (keeping its capacity): nothing this thread
  // does while it runs can open a group (the calls below reach no user code). The released comms
  // are freed last, whatever happened before.
  GroupState& g = t_group;
  struct Clear {
    GroupState& g;
    ~Clear() {
      g.inits.clear();
      g.inits_comms.clear();
      g.comms.clear();
      run_releases(g);
    }
  } clear{g};
  return guarded(nullptr, "ncclGroupEnd", [&] {
    ncclResult_t rc = ncclSuccess;

    // Inits first, all at once: each blocks until its whole group has joined.
    bool async = false;
    run_each(g.inits.size(), [&](size_t i) { g.inits[i](); });
    for (ncclComm* c : g.inits_comms) {
      if (!c) continue;
      if (!c->blocking) {
        async = true;
        continue;
      }
      const auto s = static_cast<ncclResult_t>(c->async_state.load());
      if (s != ncclSuccess && rc == ncclSuccess) rc = set_error(nullptr, s, "ncclGroupEnd: " + c->last_error);
    }

    if (g.comms.size() == 1) {
      // The hot path (torch's coalesced calls, a batch of sends and receives): no thread, no allocation.
      const ncclResult_t r = run_list(g.comms[0]);
      if (r != ncclSuccess && rc == ncclSuccess) rc = r;
    } else if (!g.comms.empty()) {
      std::vector<ncclResult_t> results(g.comms.size(), ncclSuccess);
      run_each(g.comms.size(), [&](size_t i) {
        actorcc::ncclabi::set_device(g.comms[i]->cuda_device);
        results[i] = run_list(g.comms[i]);
      });
      for (size_t i = 0; i < results.size(); ++i)
        if (results[i] != ncclSuccess && rc == ncclSuccess) rc = set_error(nullptr, results[i], g.comms[i]->last_error);
    }
    if (rc == ncclSuccess && async) return ncclInProgress;
    return rc;
  });
}
ACTORCC_NCCL_ALIAS(ncclGroupEnd)

// A simulation needs NCCL's cost model, which actorcc does not have: refused. The group is
// still closed (its deferred calls are dropped, not run), so the thread is not left inside it;
// the comms destroyed or aborted inside it are freed.
extern "C" ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (t_group.depth > 0 && --t_group.depth == 0) {
    for (ncclComm* c : t_group.comms) {
      c->pending.clear();
      c->pending_p2p.clear();
      c->in_group = false;
    }
    for (ncclComm* c : t_group.inits_comms)
      if (c) c->async_state.store(ncclInvalidUsage);
    t_group.inits.clear();
    t_group.inits_comms.clear();
    t_group.comms.clear();
    run_releases(t_group);
  }
  return set_error(nullptr, ncclInvalidUsage,
                   "ncclGroupSimulateEnd: not implemented (actorcc has no cost model to simulate with); the group "
                   "is closed and its calls were not run");
}
ACTORCC_NCCL_ALIAS(ncclGroupSimulateEnd)
