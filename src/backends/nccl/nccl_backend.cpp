// The NCCL backend: every collective goes through one NCCL communicator over all ranks. Used
// when the ranks span several nodes (until the hierarchical path exists) and when the GPUs of
// one node cannot map each other's memory (no P2P), so actorcc never falls back to anything
// slower than NCCL. NCCL is loaded at run time; its unique id travels over actorcc's bootstrap.
#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "algorithms/p2p_plan.hpp"
#include "bootstrap/outcomes.hpp"
#include "common/cuda_owners.hpp"
#include "common/log.hpp"
#include "backends/backend.hpp"
#include "transport/nccl/nccl_loader.hpp"

namespace actorcc {
namespace {

using cuda_rt::check;

// Shared with the abort listener, which may fire from the bootstrap's reader thread after the
// backend is gone: it holds only a weak reference.
struct NcclState {
  std::unique_ptr<nccl::NcclLib> lib;
  std::mutex mu;
  std::unique_ptr<nccl::NcclComm> comm;
};

class NcclBackend final : public BackendImpl {
 public:
  NcclBackend(GroupContext& ctx, std::string why) : ctx_(ctx), why_(std::move(why)), state_(std::make_shared<NcclState>()) {
    device_ = ctx.options.device;
    // Every rank reports whether it has a device and an NCCL before any rank goes on: a rank that
    // threw here alone would skip the id exchange, and the ranks' next exchanges would pair up
    // wrongly (the others taking its failure report for NCCL's id, then waiting in NCCL's setup).
    std::string id, err;
    try {
      check(cudaSetDevice(device_), "cudaSetDevice", ctx.rank);
      state_->lib = nccl::NcclLib::load(nccl::default_library());
      if (ctx.rank == 0) id = state_->lib->unique_id();
    } catch (const std::exception& e) {
      err = Outcomes::reason(e);
    }
    const auto ready = Outcomes::gather_result(*ctx.bootstrap, err, id, Deadline::after(ctx.options.join_timeout));
    if (!ready.all_ok()) throw nccl::NcclError("not usable on every rank: " + ready.reasons());
    // NCCL's setup is bounded here (NcclLib::init_rank with a wait), so a rank that never
    // reaches it or fails in it cannot leave the others waiting forever: every rank waits
    // within the join timeout and the group's abort, and a rank whose setup fails aborts the
    // group, which ends the others' waits at once with its reason.
    nccl::NcclWait wait{ctx.options.join_timeout, [abort = ctx.abort] { abort->throw_if_raised(); }, ctx.rank};
    try {
      state_->comm = state_->lib->init_rank(ctx.world, ready.text(0), ctx.rank, wait);
    } catch (const std::exception& e) {
      if (!ctx.abort->raised()) ctx.bootstrap->abort(std::string("NCCL setup failed: ") + e.what());
      throw;
    }
    check(cudaMalloc(&scratch_, 16), "cudaMalloc(barrier scratch)", ctx.rank);
    std::weak_ptr<NcclState> weak = state_;
    ctx.abort->on_raise([weak] {
      // ncclCommAbort unblocks NCCL kernels waiting for a rank that is gone.
      if (auto s = weak.lock()) {
        std::lock_guard<std::mutex> g(s->mu);
        if (s->comm) s->comm->abort();
      }
    });
    LOG_WARN("rank " << ctx.rank << ": using NCCL " << state_->lib->version() << " from " << state_->lib->path()
                     << " for all collectives: " << why_);
  }

  ~NcclBackend() override {
    {
      std::lock_guard<std::mutex> g(state_->mu);
      state_->comm.reset();
    }
    if (scratch_) cudaFree(scratch_);
  }

  Backend kind() const override { return Backend::Cuda; }
  int device() const override { return device_; }

  void run(const CollArgs& a) override {
    std::lock_guard<std::mutex> g(state_->mu);
    if (!state_->comm) ctx_.abort->rethrow();
    if (a.coll == Collective::Barrier) {
      // NCCL has no barrier: a one-element all-reduce orders the ranks on the stream.
      state_->comm->run(Collective::AllReduce, scratch_, scratch_, 1, DataType::Int32, RedOp::Sum, 0, a.stream);
      return;
    }
    if (is_p2p_based(a.coll)) {
      // Sends and receives in one NCCL group. NCCL does not compare a send's size with the
      // matching recv's: on this path a disagreement is the caller's to avoid.
      std::vector<nccl::NcclComm::Transfer> xs;
      for (const P2POp& op : p2p_transfers(a, ctx_.rank, ctx_.world))
        xs.push_back({op.kind == P2POp::Kind::Send, op.buf, op.count, op.dtype, op.peer});
      state_->comm->transfers(xs, a.stream);
      return;
    }
    if (a.count == 0) return;
    if (a.coll == Collective::Reduce) {
      state_->comm->reduce(a.send, a.recv, a.count, a.dtype, a.op, a.root, a.stream);
      return;
    }
    state_->comm->run(a.coll, a.send, a.recv, a.count, a.dtype, a.op, a.root, a.stream);
  }

  std::string plan(Collective, size_t, bool) const override { return "nccl"; }

  // NCCL's kernels wait for a silent peer indefinitely, so the stream is polled against the
  // call timeout and the group's abort (which ncclCommAbort turns into kernels that return)
  // rather than synchronised blindly. A timeout here poisons the group, naming no rank: NCCL
  // does not say whom it waits for.
  void synchronize(void* stream) override {
    cuda_rt::DeviceGuard guard(device_);
    const Deadline dl = Deadline::after(ctx_.options.timeout);
    for (;;) {
      const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream));
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) cuda_rt::check(e, "cudaStreamQuery (synchronize)");
      ctx_.abort->throw_if_raised();
      if (dl.expired()) {
        const std::string msg = "rank " + std::to_string(ctx_.rank) + ": synchronize: the NCCL calls on the stream did "
                                "not finish within " + std::to_string(ctx_.options.timeout.count()) + " ms";
        ctx_.abort->raise(-1, ErrorCode::Timeout, msg);
        ctx_.bootstrap->abort(msg);
        ctx_.abort->rethrow();
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ctx_.abort->throw_if_raised();
  }

 private:
  GroupContext& ctx_;
  std::string why_;
  std::shared_ptr<NcclState> state_;
  int device_ = 0;
  void* scratch_ = nullptr;
};

}  // namespace

std::unique_ptr<BackendImpl> make_nccl_backend(GroupContext& ctx, const std::string& why) {
  return std::make_unique<NcclBackend>(ctx, why);
}

}  // namespace actorcc
