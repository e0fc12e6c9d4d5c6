// NCCL loaded at run time with dlopen: actorcc has no link-time dependency on NCCL and runs
// where none is installed. Used by the NCCL backend (between nodes, and where GPUs of one node
// cannot reach each other) and by actorcc-bench's baseline. nccl.h supplies only types and
// prototypes (function-pointer typedefs).
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actorcc/error.hpp"
#include "actorcc/types.hpp"

namespace actorcc::nccl {

// A failed NCCL call or a missing/unusable NCCL library.
class NcclError : public Error {
 public:
  explicit NcclError(const std::string& m) : Error(ErrorCode::System, "NCCL: " + m) {}
};

// The library to load: ACTORCC_NCCL_LIB if set, else "libnccl.so.2" (found by the loader's
// search path, or already loaded into this process by PyTorch).
std::string default_library();

class NcclComm;

// What ends a wait for NCCL's setup other than its success. ncclCommInitRank waits for every
// rank with no bound: a rank that never reaches it, or fails in it (NCCL refuses two ranks on
// one GPU only on those two), leaves the others there forever.
struct NcclWait {
  std::chrono::milliseconds limit;  // TimeoutError after this long
  std::function<void()> check;      // polled; throws when the caller's group was aborted
  int rank = -1;                    // named in the errors
};

class NcclLib {
 public:
  // Opens `path` (a file path or a soname for the loader's search) and resolves the entry
  // points. Throws NcclError with dlerror()'s text.
  static std::unique_ptr<NcclLib> load(const std::string& path);
  ~NcclLib();

  std::string version() const;   // "2.28.9"
  std::string path() const;      // the file that was loaded (dladdr), or what was asked for
  std::string unique_id() const; // ncclGetUniqueId, as 128 raw bytes
  // ncclCommInitRank with an id from unique_id() (any rank's copy of rank 0's id).
  std::unique_ptr<NcclComm> init_rank(int world, const std::string& id, int rank) const;
  // The same, bounded by `wait`: the blocking call runs on a helper thread for the calling
  // thread's current device while this thread polls `wait`. On timeout (TimeoutError naming the
  // rank) or abort (what wait.check throws) the helper is left behind: it aborts the
  // communicator if NCCL ever returns one (when the other ranks' NCCL sockets close, or never).
  // The communicator itself stays blocking: a nonblocking one (ncclConfig_t.blocking = 0) makes
  // every later collective return ncclInProgress and launch from a new thread, measured 112
  // against 38 us for a 1 KiB all-reduce (bench/results/2026-11-30-h200x2-w/nccl-path).
  std::unique_ptr<NcclComm> init_rank(int world, const std::string& id, int rank, const NcclWait& wait) const;
  // ncclMemAlloc / ncclMemFree (memory that symmetric windows can register).
  void* mem_alloc(size_t bytes) const;
  void mem_free(void* p) const;

  struct Fns;
  const Fns& fns() const { return *fns_; }

 private:
  NcclLib() = default;
  void* handle_ = nullptr;
  std::string path_;
  std::unique_ptr<Fns> fns_;
};

class NcclComm {
 public:
  NcclComm(const NcclLib& lib, void* comm) : lib_(lib), comm_(comm) {}
  ~NcclComm();  // ncclCommDestroy (windows must be deregistered first)
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // Enqueues one collective with actorcc's argument conventions (counts as in actorcc).
  void run(Collective c, const void* send, void* recv, size_t count, DataType t, RedOp op, int root,
           void* stream) const;

  // Sends and receives (counts in elements, peers as NCCL ranks) issued between
  // ncclGroupStart and ncclGroupEnd, so any pattern of them completes, as NCCL's grouped
  // point-to-point does; a transfer to this rank itself is a send and a recv to itself.
  struct Transfer {
    bool send;
    void* buf;
    size_t count;
    DataType dtype;
    int peer;
  };
  void transfers(const std::vector<Transfer>& xs, void* stream) const;
  void reduce(const void* send, void* recv, size_t count, DataType t, RedOp op, int root, void* stream) const;

  // ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC on ncclMemAlloc memory (collective
  // over the communicator).
  void* window_register(void* p, size_t bytes) const;  // returns the ncclWindow_t
  void window_deregister(void* win) const;
  void abort();  // ncclCommAbort; the destructor then does nothing
  // ncclCommGetAsyncError: "" while the communicator is healthy, else NCCL's error text (a
  // network failure, a peer's socket closed). Safe to poll while kernels run.
  std::string async_error() const;

 private:
  const NcclLib& lib_;
  void* comm_;
};

}  // namespace actorcc::nccl
