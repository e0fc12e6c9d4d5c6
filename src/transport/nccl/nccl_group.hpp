// One NCCL communicator over some ranks of an actorcc group, set up and watched the actorcc
// way: the id travels over the group's bootstrap, ncclCommInitRank runs on a helper thread
// bounded by the join timeout and the group's abort, and every enqueued call is tracked by an
// NcclWatch (nccl_watch.hpp) against the call timeout and NCCL's async error. An abort of the
// group (a peer died, a timeout anywhere) calls ncclCommAbort, so NCCL kernels waiting for a
// rank that is gone end and the caller's stream drains: no process is left spinning.
//
// Used with all ranks by the flat NCCL backend, and with one rail each (one rank per node:
// topology/rails.hpp) by the GPU hierarchical backend.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "group/group_context.hpp"
#include "transport/nccl/nccl_loader.hpp"

namespace actorcc::nccl {

class NcclWatch;

class NcclGroup {
 public:
  // Collective over every rank of `ctx` (one bootstrap all-gather of every rank's readiness
  // and its communicator's id, made by each communicator's first member). `members`: whole-
  // group ranks of this rank's communicator, in NCCL rank order, this rank among them; empty
  // when this rank joins none (the ranks of a node-leaders rail's other ranks). Throws
  // NcclError naming every rank that could not load NCCL or set it up; a rank whose setup
  // fails aborts the group with its reason, ending the others' waits.
  static std::shared_ptr<NcclGroup> join(GroupContext& ctx, const std::vector<int>& members, const std::string& what);
  ~NcclGroup();

  bool joined() const { return comm_ != nullptr || aborted_; }
  const std::vector<int>& members() const { return members_; }
  int nccl_rank() const { return nccl_rank_; }
  const NcclLib& lib() const { return *lib_; }
  const std::string& what() const { return what_; }
  // This rank's set-up, in ms: ncclCommInitRank, then the first calls that connect NCCL's
  // channels (0 for a rank in no communicator).
  double init_ms() const { return init_ms_; }
  double connect_ms() const { return connect_ms_; }

  // Runs `enqueue` on the communicator under its lock, then has the watch track `stream`
  // (the calls' completion) with `call` naming it in a timeout. Throws the group's error when
  // the communicator was aborted.
  template <typename F>
  void call(const char* call, void* stream, F&& enqueue) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (!comm_) abort_->rethrow();
      enqueue(*comm_);
    }
    track(call, stream);
  }

 private:
  NcclGroup() = default;
  void track(const char* call, void* stream);
  void connect(GroupContext& ctx);

  std::shared_ptr<NcclLib> lib_;
  std::shared_ptr<AbortSignal> abort_;
  std::vector<int> members_;
  int nccl_rank_ = -1;
  std::string what_;
  std::mutex mu_;
  std::unique_ptr<NcclComm> comm_;
  bool aborted_ = false;
  double init_ms_ = 0, connect_ms_ = 0;
  std::unique_ptr<NcclWatch> watch_;
};

}  // namespace actorcc::nccl
