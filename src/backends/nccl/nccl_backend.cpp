// The NCCL backend: every collective goes through one NCCL communicator over all ranks. Used
// when the GPUs of one node cannot map each other's memory (no P2P), so actorcc never falls
// back to anything slower than NCCL, and across nodes when ACTORCC_MULTINODE=flat asks for it
// (the comparison the bench makes). NCCL is loaded at run time; its unique id travels over
// actorcc's bootstrap, and every call is bounded (transport/nccl/nccl_group.hpp).
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "algorithms/p2p_plan.hpp"
#include "common/cuda_owners.hpp"
#include "common/log.hpp"
#include "backends/backend.hpp"
#include "transport/nccl/nccl_group.hpp"

namespace actorcc {
namespace {

using cuda_rt::check;

class NcclBackend final : public BackendImpl {
 public:
  NcclBackend(GroupContext& ctx, std::string why) : ctx_(ctx), why_(std::move(why)), device_(ctx.options.device) {
    std::vector<int> all(ctx.world);
    for (int r = 0; r < ctx.world; ++r) all[r] = r;
    nccl_ = nccl::NcclGroup::join(ctx, all, "the group's NCCL communicator");
    check(cudaMalloc(&scratch_, 16), "cudaMalloc(barrier scratch)", ctx.rank);
    LOG_WARN("rank " << ctx.rank << ": using NCCL " << nccl_->lib().version() << " from " << nccl_->lib().path()
                     << " for all collectives: " << why_);
  }

  ~NcclBackend() override {
    nccl_.reset();
    if (scratch_) cudaFree(scratch_);
  }

  Backend kind() const override { return Backend::Cuda; }
  int device() const override { return device_; }

  void run(const CollArgs& a) override {
    if (a.coll == Collective::Barrier) {
      // NCCL has no barrier: a one-element all-reduce orders the ranks on the stream.
      nccl_->call("barrier", a.stream, [&](nccl::NcclComm& c) {
        c.run(Collective::AllReduce, scratch_, scratch_, 1, DataType::Int32, RedOp::Sum, 0, a.stream);
      });
      return;
    }
    if (is_p2p_based(a.coll)) {
      // Sends and receives in one NCCL group. NCCL does not compare a send's size with the
      // matching recv's: on this path a disagreement is the caller's to avoid.
      std::vector<nccl::NcclComm::Transfer> xs;
      for (const P2POp& op : p2p_transfers(a, ctx_.rank, ctx_.world))
        xs.push_back({op.kind == P2POp::Kind::Send, op.buf, op.count, op.dtype, op.peer});
      nccl_->call(to_string(a.coll).data(), a.stream, [&](nccl::NcclComm& c) { c.transfers(xs, a.stream); });
      return;
    }
    if (a.count == 0) return;
    nccl_->call(to_string(a.coll).data(), a.stream, [&](nccl::NcclComm& c) {
      if (a.coll == Collective::Reduce) c.reduce(a.send, a.recv, a.count, a.dtype, a.op, a.root, a.stream);
      else c.run(a.coll, a.send, a.recv, a.count, a.dtype, a.op, a.root, a.stream);
    });
  }

  std::string plan(Collective, size_t, bool) const override { return "nccl"; }

 private:
  GroupContext& ctx_;
  std::string why_;
  int device_ = 0;
  std::shared_ptr<nccl::NcclGroup> nccl_;
  void* scratch_ = nullptr;
};

}  // namespace

std::unique_ptr<BackendImpl> make_nccl_backend(GroupContext& ctx, const std::string& why) {
  return std::make_unique<NcclBackend>(ctx, why);
}

}  // namespace actorcc
