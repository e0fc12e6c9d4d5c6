// The GPU backend for groups that span nodes: each node's ranks form a sub-group served by
// actorcc's CUDA backend (NVLink kernels over VMM-shared memory), and each rail (one rank per
// node, topology/rails.hpp) is one NCCL communicator, so NCCL carries only what crosses the
// network and never sees two GPUs of one node. The collectives are the hierarchical plans,
// run by gpu_hier_rules. Calls the plans do not cover (reduce, gather, scatter, all_to_all)
// go to one flat NCCL communicator over all ranks, made on first use, with a logged reason;
// send/recv and send_recv are refused across nodes for now (docs/multinode.md, "Not built yet").
#include <chrono>
#include <memory>

#include "backends/backend.hpp"
#include "backends/hier/gpu_hier_rules.hpp"
#include "backends/hier/sub_group.hpp"
#include "bootstrap/outcomes.hpp"
#include "common/log.hpp"
#include "topology/topology.hpp"

namespace actorcc {
namespace {

using cuda_rt::check;

// Scratch per chunk slot: a 4 MiB chunk's shard for all_reduce and broadcast, and for
// reduce_scatter / all_gather a chunk of every block (the rules cut chunks to fit).
constexpr size_t kSlotBytes = size_t{8} << 20;

class GpuHierBackend final : public BackendImpl {
 public:
  explicit GpuHierBackend(GroupContext& ctx) : ctx_(ctx), device_(ctx.options.device) {
    cuda_rt::DeviceGuard guard(device_);
    g_.rank = ctx.rank;
    g_.layout = topology::node_layout(ctx.peers);
    g_.rails = topology::plan_rails(g_.layout);
    if (!g_.rails.note.empty() && ctx.rank == 0) LOG_WARN("rank 0: " << g_.rails.note);
    const int my_node = g_.layout.node_of[ctx.rank];

    // The node part. Every rank learns whether every node's CUDA backend came up before any
    // goes on to the rails, so a node that failed never leaves the others in NCCL's setup.
    node_group_ = make_sub_group(ctx, g_.layout.nodes[my_node], "-n" + std::to_string(my_node));
    std::string err;
    try {
      node_ = make_cuda_backend(node_group_->ctx);
    } catch (const std::exception& e) {
      err = Outcomes::reason(e);
    }
    const auto nodes_ok = Outcomes::gather_error(*ctx.bootstrap, err, Deadline::after(ctx.options.join_timeout));
    if (!nodes_ok.all_ok())
      throw UnsupportedError("rank " + std::to_string(ctx.rank) + ": the node part (CUDA backend) failed on " +
                                 nodes_ok.reasons(),
                             ctx.rank);

    // The network part: this rank's rail.
    const int rail = g_.rails.rail_of[ctx.rank];
    const auto t0 = std::chrono::steady_clock::now();
    rail_ = nccl::NcclGroup::join(ctx, rail >= 0 ? g_.rails.rails[rail] : std::vector<int>{},
                                  "rail " + std::to_string(std::max(rail, 0)));
    rail_setup_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    cu_ = std::make_unique<CudaParts>();
    g_.node = node_.get();
    g_.rail = rail >= 0 ? rail_.get() : nullptr;
    g_.node_s = cu_->node_s.get();
    g_.rail_s = cu_->rail_s.get();
    g_.fork = &cu_->fork;
    g_.joins = cu_->joins;
    g_.ev0 = cu_->ev0;
    g_.ev1 = cu_->ev1;
    g_.hop = &cu_->hop;
    g_.scratch = static_cast<uint8_t*>(cu_->scratch.get()) + 64;
    g_.slot_bytes = kSlotBytes;
    g_.one = static_cast<int*>(cu_->scratch.get());
    LOG_INFO("rank " << ctx.rank << ": GPU across " << g_.layout.num_nodes() << " nodes, "
                     << (g_.rails.note.empty() ? "one NCCL rail per local index" : "one NCCL rail of node leaders")
                     << (rail >= 0 ? ", in " + rail_->what() : std::string(", in no rail")) << "; rail setup "
                     << rail_setup_ms_ << " ms (NCCL init " << rail_->init_ms() << ", connect " << rail_->connect_ms()
                     << ")");
  }

  ~GpuHierBackend() override {
    if (!cu_) return;
    cuda_rt::DeviceGuard guard(device_);
    // Work still queued uses the scratch and the streams.
    cudaStreamSynchronize(cu_->node_s.get());
    cudaStreamSynchronize(cu_->rail_s.get());
  }

  Backend kind() const override { return Backend::Cuda; }
  int device() const override { return device_; }

  void run(const CollArgs& a) override {
    if (!hier::rules_serve(a.coll)) return flat(a);
    cuda_rt::DeviceGuard guard(device_);
    try {
      hier::run_rules(g_, a, plan_of(a.coll, a.count, dtype_size(a.dtype), a.root));
    } catch (const UnsupportedError&) {
      throw;  // refused before any work: every rank refuses alike, the group stays usable
    } catch (const Error& e) {
      // A step that failed leaves the group mid-collective: poison it for everyone, with the
      // cause (the node's kernels stop on the abort word, the rails through ncclCommAbort).
      ctx_.abort_group(e.what());
      throw;
    }
  }

  std::vector<std::pair<std::string, double>> setup_ms() const override {
    return {{"rail_setup", rail_setup_ms_}, {"nccl_init", rail_->init_ms()}, {"connect", rail_->connect_ms()}};
  }

  std::string plan(Collective c, size_t bytes, bool) const override {
    if (!hier::rules_serve(c)) return is_point_to_point(c) ? "none" : "nccl";
    const bool per_rank = c == Collective::ReduceScatter || c == Collective::AllGather;
    return plan_of(c, per_rank ? bytes / ctx_.world : bytes, 1, 0).name;
  }

 private:
  topology::HierPlan plan_of(Collective c, size_t count, size_t es, int root) const {
    return topology::plan_hier(c, c == Collective::Barrier ? 1 : count, es, g_.layout, g_.rails, root, g_.tuning);
  }

  // The calls the plans do not cover, through one NCCL communicator over all ranks. It is
  // collective to set up, so only calls every rank makes may create it.
  void flat(const CollArgs& a) {
    const std::string what(to_string(a.coll));
    if (!flat_) {
      if (is_point_to_point(a.coll))
        throw UnsupportedError("rank " + std::to_string(ctx_.rank) + ": " + what +
                                   " is not available yet for GPU groups that span nodes",
                               ctx_.rank);
      if (const auto [r, q] = topology::shared_gpu(ctx_.peers); r >= 0)
        throw UnsupportedError("rank " + std::to_string(ctx_.rank) + ": " + what +
                                   " across nodes runs on flat NCCL, which refuses ranks " + std::to_string(r) +
                                   " and " + std::to_string(q) + " sharing one GPU",
                               ctx_.rank);
      flat_ = make_nccl_backend(ctx_, what + " is not built on the hierarchical path; flat NCCL carries it");
    }
    flat_->run(a);
  }

  GroupContext& ctx_;
  int device_;
  hier::GpuHier g_;
  std::unique_ptr<SubGroup> node_group_;
  std::unique_ptr<BackendImpl> node_;
  std::shared_ptr<nccl::NcclGroup> rail_;
  std::unique_ptr<BackendImpl> flat_;
  double rail_setup_ms_ = 0;
  // Made on the backend's device, once the parts above stand.
  struct CudaParts {
    cuda_rt::Stream node_s, rail_s;
    cuda_rt::Event fork, joins[2], ev0[hier::kMaxDepth], ev1[hier::kMaxDepth], hop;
    cuda_rt::DeviceBuffer scratch{hier::kMaxDepth * kSlotBytes + 64};
  };
  std::unique_ptr<CudaParts> cu_;
};

}  // namespace

std::unique_ptr<BackendImpl> make_gpu_hier_backend(GroupContext& ctx) { return std::make_unique<GpuHierBackend>(ctx); }

}  // namespace actorcc
