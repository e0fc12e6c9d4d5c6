// NCCL loaded at run time with dlopen: actorcc has no link-time dependency on NCCL and runs
// where none is installed. Used by the NCCL backend (between nodes, and where GPUs of one node
// cannot reach each other) and by actorcc-bench's baseline. nccl.h supplies only types and
// prototypes (function-pointer typedefs).
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

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

// Bounds for a nonblocking communicator (ncclConfig_t::blocking = 0), whose calls may return
// ncclInProgress. A blocking ncclCommInitRank waits for every rank forever: a rank that never
// reaches NCCL's setup, or fails in it (NCCL refuses two ranks on one GPU only on those two),
// leaves the others there with nothing to end the wait. A nonblocking one can be polled,
// checked against the group's abort and deadline, and aborted.
struct NcclWait {
  std::chrono::milliseconds setup;  // ncclCommInitRankConfig until the communicator is ready
  std::chrono::milliseconds call;   // any later call still in progress (connection setup, finalize)
  std::function<void()> check;      // throws when the caller's group was aborted
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
  // ncclCommInitRank with an id from unique_id() (any rank's copy of rank 0's id): blocking, as
  // most NCCL users run it (the benchmark's baseline).
  std::unique_ptr<NcclComm> init_rank(int world, const std::string& id, int rank) const;
  // The same, nonblocking and bounded by `wait`: on timeout or abort the half-made communicator
  // is aborted and the error thrown (TimeoutError naming the rank, or what `wait.check` threw).
  // NCCL before 2.14 has no nonblocking setup: then the blocking one.
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
  NcclComm(const NcclLib& lib, void* comm, std::optional<NcclWait> wait = std::nullopt)
      : lib_(lib), comm_(comm), wait_(std::move(wait)) {}
  // ncclCommDestroy (windows must be deregistered first); a nonblocking communicator is
  // finalized first, within wait.call, and aborted if that does not finish.
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // Enqueues one collective with actorcc's argument conventions (counts as in actorcc).
  void run(Collective c, const void* send, void* recv, size_t count, DataType t, RedOp op, int root,
           void* stream) const;

  // ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC on ncclMemAlloc memory (collective
  // over the communicator).
  void* window_register(void* p, size_t bytes) const;  // returns the ncclWindow_t
  void window_deregister(void* win) const;
  void abort();  // ncclCommAbort; the destructor then does nothing

  // Throws NcclError for a failed result; for ncclInProgress on a nonblocking communicator,
  // first polls its state until the call is done, within `limit` (TimeoutError) and wait.check.
  void finish(int result, const char* what, std::chrono::milliseconds limit) const;

 private:
  int poll_state(const char* what, std::chrono::milliseconds limit) const;

  const NcclLib& lib_;
  void* comm_;
  std::optional<NcclWait> wait_;  // set: nonblocking
};

}  // namespace actorcc::nccl
