// ncclComm: what an ncclComm_t points at. One actorcc Communicator (null until its init has
// finished), the reduction adapters' state, the error texts, and what a group defers on it.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "abi.h"
#include "adapt.hpp"
#include "actorcc/communicator.hpp"
#include "actorcc/error.hpp"

// Each exported function is also exported as its profiling alias pnccl<Name>, as NCCL does.
#define ACTORCC_NCCL_ALIAS(name) \
  extern "C" __attribute__((alias(#name), visibility("default"))) decltype(name) p##name;

namespace actorcc::ncclabi {

// One deferred or immediate collective (group.cpp keeps a list of them per communicator).
enum class CollKind : uint8_t { AllReduce, ReduceScatter, Reduce, AllGather, Broadcast, AllToAll, Gather, Scatter };
struct CollCall {
  CollKind kind;
  const void* send;
  void* recv;
  size_t count;
  int dtype;
  int op;
  int root;
  void* stream;
  // ncclCollConfig_t.launchCompletionEvent (2.32): recorded on `stream` once the call is issued.
  void* done_event = nullptr;
};

// What an ncclCommRegister or ncclCommWindowRegister handle names (memory.cpp).
struct RegisteredBuffer {
  void* buf;
  size_t bytes;
};

}  // namespace actorcc::ncclabi

struct ncclComm {
  static constexpr uint64_t kMagic = 0x6e63636c41434321ull;  // "ncclACC!"
  uint64_t magic = kMagic;
  // Set (release) once init has succeeded; never changes after. Calls load it (acquire).
  std::atomic<actorcc::Communicator*> core{nullptr};
  std::unique_ptr<actorcc::Communicator> owned;
  actorcc::ncclabi::AdaptStatePtr adapt;
  int rank = -1;
  int nranks = 0;
  int cuda_device = -1;   // the device init ran on (-1 on the CPU backend)
  bool blocking = true;   // ncclConfig_t.blocking (NCCL's default: 1)

  // ncclCommGetAsyncError's answer: ncclInProgress during init, then ncclSuccess or the first
  // error seen (sticky).
  std::atomic<int> async_state{ncclInProgress};

  // Nonblocking init runs on its own thread. If the comm is aborted or destroyed before it ends,
  // `abandoned` hands the comm to that thread, which frees it when the init returns.
  std::mutex init_mu;
  std::thread init_thread;
  bool init_running = false;
  bool abandoned = false;

  // Calls in progress on other threads; ncclCommAbort waits for them after aborting the group
  // (which makes each of them return) before it frees the communicator.
  std::atomic<int> busy{0};
  // When init returned (set before `core`), and whether a call has come since (BusyScope).
  std::chrono::steady_clock::time_point ready_at;
  std::atomic<bool> called{false};
  std::atomic<bool> closing{false};
  // ncclCommRevoke: set with `closing` (so calls are refused), but the comm may still be shrunk
  // and must still be destroyed (elastic.cpp).
  std::atomic<bool> revoked{false};

  // The id ncclCommGetUniqueId made for the next ncclCommGrow (its root lives in this process);
  // consumed by that grow, stopped if the comm is destroyed first.
  std::mutex grow_mu;
  std::optional<actorcc::UniqueId> grow_id;

  std::mutex err_mu;
  std::string last_error;

  // The comm's registration and window handles, by address: a handle is looked up here, never
  // read through the caller's pointer (a stale or foreign one is refused, not dereferenced), and
  // what is still registered is freed with the comm.
  std::mutex reg_mu;
  std::map<const void*, std::unique_ptr<actorcc::ncclabi::RegisteredBuffer>> registrations;

  // ncclCommShrink's claim on this comm (ShrinkState, elastic.cpp): one shrink at a time, and
  // none once one has formed the shrunk group.
  std::atomic<int> shrink_state{0};

  // Deferred by the group open on the issuing thread (group.cpp).
  std::vector<actorcc::ncclabi::CollCall> pending;
  std::vector<actorcc::P2POp> pending_p2p;
  size_t p2p_position = 0;  // the p2p batch runs where its first op was issued
  void* p2p_stream = nullptr;
  bool in_group = false;
  // ncclCommDestroy or ncclCommAbort was called inside that group: the comm is freed at its end.
  bool release_pending = false;
};

namespace actorcc::ncclabi {

// --- errors.cpp -----------------------------------------------------------------------------
ncclResult_t to_nccl(ErrorCode code) noexcept;
// Records `text` as the calling thread's last error and, when comm is not null, the comm's;
// returns `code`. Never throws.
ncclResult_t set_error(ncclComm* comm, ncclResult_t code, const std::string& text) noexcept;
// For a catch(...) block: records the exception in flight, naming `fn`, and returns its code.
ncclResult_t fail_current(ncclComm* comm, const char* fn) noexcept;
// "rank R: " (or "" when the rank is not known yet).
std::string rank_prefix(const ncclComm* comm);

// Runs `body` (returning ncclResult_t) and turns any exception into an error code.
template <typename F>
inline ncclResult_t guarded(ncclComm* comm, const char* fn, F&& body) noexcept {
  try {
    return body();
  } catch (...) {
    return fail_current(comm, fn);
  }
}

// A bad argument of a call that is collective over comm's group (ncclCommSplit, ncclCommShrink,
// ncclCommGrow, ncclSend/ncclRecv): the other ranks may already wait inside the same call, so
// the refusal goes through Communicator::refuse_call, as the collectives' own checks do: in a
// group of more than one rank it aborts the group, and their calls fail within moments naming
// this rank and `what` (NCCL leaves them waiting). Before comm's init has run there is no group
// to tell. Records the error naming `fn` and the rank; returns ncclInvalidArgument.
ncclResult_t refuse_argument(ncclComm* comm, const char* fn, const std::string& what) noexcept;

// An invalid comm handle (null or not one of ours) as NCCL answers it.
ncclResult_t bad_comm(const char* fn, const ncclComm* comm) noexcept;
inline bool valid(const ncclComm* comm) noexcept { return comm && comm->magic == ncclComm::kMagic; }

// --- config.cpp -----------------------------------------------------------------------------
struct CommConfig {
  bool blocking = true;
  std::string name;  // commName, for the logs
};
// Reads `cfg` as NCCL does (by size and version; NULL = defaults); on a bad struct returns
// what is wrong with it (empty when nothing is).
std::string read_config(const ncclConfig_t* cfg, CommConfig* out);
// The same for a call that refuses a bad struct on this rank alone (an init): returns
// ncclInvalidArgument with the text set, naming `fn`.
ncclResult_t parse_config(const ncclConfig_t* cfg, CommConfig* out, const char* fn) noexcept;

// --- coll_config.cpp ------------------------------------------------------------------------
// Reads an nccl*Config call's ncclCollConfig_t as NCCL 2.31/2.32 do (by size and version; NULL:
// the plain call) into `call`; returns what is wrong with it (empty when nothing is). Checked on
// the calling rank alone, before the communicator is looked at, as NCCL does.
std::string read_coll_config(const ncclCollConfig_t* cfg, CollCall* call);

// --- device.cpp -----------------------------------------------------------------------------
int current_device() noexcept;  // -1 when no GPU is usable or ACTORCC_BACKEND=cpu
void set_device(int device) noexcept;
// Waits for this process's work on `device` (none on the CPU backend): what ncclCommFinalize
// flushes. Not the streams the calls ran on: those are the caller's and may be destroyed by then.
// Bounded without a deadline of its own: every kernel of the library waits under the call
// timeout and the group's abort word, so this wait ends at most one call timeout after the
// last peer stopped answering; what else runs on the device is the caller's (NCCL's finalize
// waits for its own work the same way).
void finish_device_work(int device, int rank);  // rank: named in its error
// cudaEventRecord(event, stream) for a collective's launchCompletionEvent; throws CudaError naming
// `rank`, or Unsupported in a build without CUDA.
void record_event(void* event, void* stream, int rank);
// A copy of a call's input that its output overlaps, made on the call's stream (`device` >= 0:
// stream-ordered device memory, freed on that stream after the call is enqueued, so a CUDA graph
// captures the allocation too) or on the host (the CPU backend).
class StagedInput {
 public:
  StagedInput(const void* src, size_t bytes, void* stream, int device, int rank);  // rank: named in its error
  ~StagedInput();
  StagedInput(const StagedInput&) = delete;
  StagedInput& operator=(const StagedInput&) = delete;
  const void* get() const noexcept { return ptr_; }

 private:
  void* ptr_ = nullptr;
  void* stream_ = nullptr;
  bool device_ = false;
  std::vector<uint8_t> host_;
};

// --- init.cpp -------------------------------------------------------------------------------
Options comm_options(int device);
// Makes a comm whose init will run `make`; `make` returns the new Communicator.
ncclComm* new_comm(const CommConfig& cfg);
// Runs `make` for `comm` now on this thread, recording the result in comm.
void run_init(ncclComm* comm, const std::function<std::unique_ptr<Communicator>()>& make,
              const char* fn = "ncclCommInitRank") noexcept;
// Starts an init as NCCL would: deferred to ncclGroupEnd inside a group, on a thread for a
// nonblocking comm (ncclInProgress), else now.
ncclResult_t launch_init(ncclComm* comm, std::function<std::unique_ptr<Communicator>()> make, const char* fn);
// launch_init for a comm made from `parent` (split, shrink, grow). A blocking one that failed
// leaves *newcomm NULL (the child is freed: the caller never saw it) and its error on the parent
// too, where the caller's ncclGetLastError(comm) looks.
ncclResult_t launch_child(ncclComm* parent, ncclComm* child, ncclComm_t* newcomm,
                          std::function<std::unique_ptr<Communicator>()> make, const char* fn);
// Makes a comm joining the group `nid` as `rank` of `nranks` (ncclCommInitRank's body; also a
// newcomer's ncclCommGrow). `fn` names the call in errors.
ncclResult_t init_rank(ncclComm** out, int nranks, const ncclUniqueId& nid, int rank, const ncclConfig_t* config,
                       const char* fn);
// Waits for a pending init of `comm` (nonblocking init). Returns its result.
ncclResult_t wait_init(ncclComm* comm, const char* fn) noexcept;
// Frees a comm (and its Communicator) unless its init thread still runs (then that thread does).
void release_comm(ncclComm* comm) noexcept;

// --- comm_mgmt.cpp --------------------------------------------------------------------------
// ncclCommAbort's first part: refuses the comm's later calls, aborts its group (every rank's
// pending and later calls fail naming this rank), and waits until no call of the comm is inside
// the library. release_comm then frees it.
void abort_comm(ncclComm* comm) noexcept;

// --- group.cpp ------------------------------------------------------------------------------
bool in_group() noexcept;
// Inside a group: appends `job` to the inits that ncclGroupEnd starts.
void defer_init(ncclComm* comm, std::function<void()> job);
// Inside a group: ncclCommDestroy (abort false) or ncclCommAbort frees `comm` at the outermost
// ncclGroupEnd, after every init and call of the group (which may still use it). `fn` names the
// call in the refusal of a second release of the same comm.
ncclResult_t defer_release(ncclComm* comm, bool abort, const char* fn) noexcept;
void defer_coll(ncclComm* comm, const CollCall& call);
void defer_p2p(ncclComm* comm, const P2POp& op, void* stream);

// --- collectives.cpp ------------------------------------------------------------------------
// Runs one collective on a ready comm (throws actorcc::Error).
void run_coll(Communicator& c, ncclComm* comm, const CollCall& call);
// Maps an NCCL dtype for a call that moves bytes only (every dtype, fp8 included).
DataType bytes_dtype(int dtype, const char* fn, int rank);
// "unknown ncclDataType_t N" for a value that is no ncclDataType_t, else empty.
std::string unknown_dtype(int dtype);

// The comm's first call, noted at ACTORCC_LOG=info with the time since its init returned: what
// a caller does between the two (torch makes the communicator inside its first collective, then
// its streams and events) shows there, apart from the library's own part.
void note_first_call(ncclComm* comm, const char* fn) noexcept;

// Keeps the comm busy for the duration of a call, so ncclCommAbort does not free it under us.
class BusyScope {
 public:
  BusyScope(ncclComm* c, const char* fn) noexcept : c_(c) {
    c_->busy.fetch_add(1, std::memory_order_acq_rel);
    if (!c_->called.load(std::memory_order_relaxed)) note_first_call(c_, fn);
  }
  ~BusyScope() { c_->busy.fetch_sub(1, std::memory_order_acq_rel); }
  BusyScope(const BusyScope&) = delete;
  BusyScope& operator=(const BusyScope&) = delete;

 private:
  ncclComm* c_;
};

// The Communicator of a comm that a call may use now, or null with the error recorded in *rc
// (bad handle, init failed, aborted). Waits for a nonblocking init still running.
Communicator* ready_core_slow(ncclComm* comm, const char* fn, ncclResult_t* rc) noexcept;
inline Communicator* ready_core(ncclComm* comm, const char* fn, ncclResult_t* rc) noexcept {
  if (valid(comm) && !comm->closing.load(std::memory_order_acquire))
    if (Communicator* c = comm->core.load(std::memory_order_acquire)) return c;
  return ready_core_slow(comm, fn, rc);
}

}  // namespace actorcc::ncclabi
