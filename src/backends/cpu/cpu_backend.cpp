// The CPU backend: collectives on host buffers through one POSIX shared-memory segment per
// host (transport/shm), for groups whose ranks all run on one host; a group that spans hosts goes to
// backends/hier (shm inside each node, TCP rails between).
#include <memory>
#include <string>

#include "algorithms/cpu_algorithms.hpp"
#include "algorithms/p2p_plan.hpp"
#include "common/log.hpp"
#include "backends/backend.hpp"
#include "transport/shm/shm_group.hpp"

namespace actorcc {
namespace {

class CpuBackend final : public BackendImpl {
 public:
  explicit CpuBackend(GroupContext& ctx) : ctx_(ctx), group_(ShmGroup::establish(ctx)), algo_(group_->algo()) {
    const std::string& algo = algo_;
    if (!algo.empty() && algo != "oneshot" && algo != "twoshot")
      LOG_WARN("rank " << ctx.rank << ": algorithm '" << algo
                       << "' does not exist on the CPU backend (oneshot, twoshot); using the planner's choice");
  }

  Backend kind() const override { return Backend::Cpu; }
  void poll_errors() override {
    if (group_) group_->check_abort();
    else ctx_.abort->throw_if_raised();
  }

  // The segment is all this backend holds: suspend unmaps it (its name went from /dev/shm when
  // every rank had mapped it, so the last unmap frees its pages); resume establishes a new one
  // the way the constructor did, collectively, with fresh rounds and steps on every rank.
  // Calls are synchronous, so once every rank is in suspend() none reads a peer's slot.
  bool can_suspend() const override { return true; }
  void suspend() override { group_.reset(); }
  void resume() override {
    if (!group_) group_ = ShmGroup::establish(ctx_);
  }
  MemoryStats memory() const override {
    MemoryStats m;
    if (group_) m.suspendable_bytes = group_->mapped_bytes();
    return m;
  }

  void run(const CollArgs& a) override {
    // Point-to-point based calls run even with nothing to move: the empty message still lets
    // the receiver check that the sender agreed on the size.
    if (is_p2p_based(a.coll)) return cpu::send_recv(*group_, a);
    // Every call below runs through sync points, the first of which compares this descriptor
    // with every peer's (mismatch detection, always on). A call with nothing to move still
    // meets its peers once, so a rank whose peers made another call is caught there too.
    group_->begin_call(CallDesc::of(a));
    if (a.coll == Collective::Barrier || a.count == 0) {
      group_->sync(a.coll == Collective::Barrier ? "barrier" : "a call with count 0");
      return;
    }
    switch (a.coll) {
      case Collective::AllReduce:
        if (oneshot(a.count * dtype_size(a.dtype))) cpu::all_reduce_oneshot(*group_, a);
        else cpu::all_reduce_twoshot(*group_, a);
        return;
      case Collective::ReduceScatter: cpu::reduce_scatter(*group_, a); return;
      case Collective::AllGather: cpu::all_gather(*group_, a); return;
      case Collective::Broadcast: cpu::broadcast(*group_, a, local_of(a.root)); return;
      case Collective::Reduce: cpu::all_reduce_oneshot(*group_, a, local_of(a.root)); return;
      default: break;  // the point-to-point based calls, above
    }
    throw InvalidArgument("unknown collective " + std::to_string(static_cast<int>(a.coll)), ctx_.rank);
  }

  std::string plan(Collective c, size_t bytes, bool) const override {
    if (is_p2p_based(c)) return "shm_send_recv";
    switch (c) {
      case Collective::AllReduce: return oneshot(bytes) ? "shm_oneshot" : "shm_twoshot";
      case Collective::ReduceScatter: return "shm_reduce_scatter";
      case Collective::AllGather: return "shm_all_gather";
      case Collective::Broadcast: return "shm_broadcast";
      case Collective::Barrier: return "shm_barrier";
      case Collective::Reduce: return "shm_reduce";
      default: break;
    }
    return "unknown";
  }

 private:
  bool oneshot(size_t bytes) const {
    if (algo_ == "oneshot") return true;
    if (algo_ == "twoshot") return false;
    return bytes <= cpu::kOneShotMaxBytes;
  }
  // All ranks are on this host (checked at construction): global rank r is local index r.
  int local_of(int rank) const { return rank; }

  GroupContext& ctx_;
  std::unique_ptr<ShmGroup> group_;  // null while suspended
  std::string algo_;                 // local rank 0's choice (ShmGroup::algo), kept while suspended
};

}  // namespace

std::unique_ptr<BackendImpl> make_cpu_backend(GroupContext& ctx) {
  // Shared memory reaches only the ranks of one host; a group that spans hosts adds TCP rails
  // between them (every rank sees the same peer table, so every rank takes the same branch).
  if (ctx.num_nodes > 1) return make_cpu_hier_backend(ctx);
  if (static_cast<int>(ctx.local_ranks.size()) != ctx.world || ctx.local_index != ctx.rank)
    throw Error(ErrorCode::Internal, "CPU backend: local rank table does not match a single-host group", ctx.rank);
  return std::make_unique<CpuBackend>(ctx);
}

}  // namespace actorcc
