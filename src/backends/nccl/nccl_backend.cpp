// The NCCL backend: every collective goes through one NCCL communicator over all ranks. Used
// when the GPUs of one node cannot map each other's memory (no P2P), so actorcc never falls
// back to anything slower than NCCL, and across nodes when ACTORCC_MULTINODE=flat asks for it
// (the comparison the bench makes). NCCL is loaded at run time; its unique id travels over
// actorcc's bootstrap, and every call is bounded (transport/nccl/nccl_group.hpp).
#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "algorithms/p2p_check.hpp"
#include "algorithms/p2p_plan.hpp"
#include "common/cuda_owners.hpp"
#include "common/deadline.hpp"
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
      // matching recv's; checked mode does, before anything moves (check_transfers).
      const std::vector<P2POp> ops = p2p_transfers(a, ctx_.rank, ctx_.world);
      if (ctx_.options.checked) {
        const Refusal r = check_transfers(a, ops);
        if (!r.why.empty()) {
          ctx_.abort->raise(r.peer, r.code, r.why);
          ctx_.abort->rethrow();
        }
      }
      std::vector<nccl::NcclComm::Transfer> xs;
      for (const P2POp& op : ops) xs.push_back({op.kind == P2POp::Kind::Send, op.buf, op.count, op.dtype, op.peer});
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
        const std::string msg = "synchronize: the NCCL calls on the stream did "
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
  struct Refusal {
    int peer = -1;
    ErrorCode code = ErrorCode::InvalidArgument;
    std::string why;  // empty: the transfers agree
  };

  // Checked mode: each pair swaps its transfer summaries (algorithms/p2p_check.hpp) in one NCCL
  // group of fixed-size messages, which always match, and both ends compare them on the host
  // before the data group is issued. The cheapest sound check here: NCCL takes every count from
  // its own host, so the comparison must happen on the host before the data's NCCL calls; that
  // costs a stream synchronisation per call (bounded by the timeout and the group's abort), so
  // checked calls on this path are neither asynchronous nor capturable (a capturing stream
  // skips the check). A peer that posts no transfer at all leaves the swap unanswered: a
  // timeout naming it. Unchecked calls rely on the caller, as NCCL does.
  Refusal check_transfers(const CollArgs& a, const std::vector<P2POp>& ops) {
    auto stream = static_cast<cudaStream_t>(a.stream);
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) {
      cudaGetLastError();
      return {};
    }
    const auto mine = summarize_transfers(ops, ctx_.world);
    const auto peers = transfer_peers(mine, ctx_.rank);
    if (peers.empty()) return {};
    constexpr size_t B = sizeof(P2PPeerSummary);
    // Kept for the backend's life: after a timeout NCCL may still write into it until aborted.
    if (!summaries_) summaries_ = std::make_unique<cuda_rt::DeviceBuffer>(2 * size_t(ctx_.world) * B);
    char* out = static_cast<char*>(summaries_->get());
    char* in = out + size_t(ctx_.world) * B;
    std::vector<nccl::NcclComm::Transfer> xs;
    for (size_t i = 0; i < peers.size(); ++i) {
      check(cudaMemcpy(out + i * B, &mine[peers[i]], B, cudaMemcpyHostToDevice), "cudaMemcpy (summaries)", ctx_.rank);
      xs.push_back({true, out + i * B, B, DataType::UInt8, peers[i]});
      xs.push_back({false, in + i * B, B, DataType::UInt8, peers[i]});
    }
    nccl_->call("checked-mode transfer summaries", stream, [&](nccl::NcclComm& c) { c.transfers(xs, stream); });
    const Deadline dl = Deadline::after(ctx_.options.timeout);
    cudaError_t e;
    while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady) {
      if (ctx_.abort->raised()) ctx_.abort->rethrow();
      if (dl.expired()) {
        std::string who;
        for (int q : peers) who += (who.empty() ? "" : ", ") + std::to_string(q);
        return {peers[0], ErrorCode::Timeout,
                std::string(to_string(a.coll)) + " (checked mode): rank " + std::to_string(ctx_.rank) +
                    "'s transfers got no answer within " + std::to_string(ctx_.options.timeout.count()) +
                    " ms from rank(s) " + who + " (a peer that posts no matching transfer, or is stuck)"};
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    check(e, "checked-mode transfer summaries", ctx_.rank);
    std::vector<P2PPeerSummary> theirs(peers.size());
    check(cudaMemcpy(theirs.data(), in, peers.size() * B, cudaMemcpyDeviceToHost), "cudaMemcpy (summaries)", ctx_.rank);
    for (size_t i = 0; i < peers.size(); ++i) {
      const std::string why = transfer_disagreement(mine[peers[i]], theirs[i], ctx_.rank, peers[i]);
      if (!why.empty())
        return {peers[i], ErrorCode::InvalidArgument,
                std::string(to_string(a.coll)) + " (checked mode): " + why + "; nothing was sent"};
    }
    return {};
  }

  GroupContext& ctx_;
  std::string why_;
  int device_ = 0;
  std::shared_ptr<nccl::NcclGroup> nccl_;
  void* scratch_ = nullptr;
  std::unique_ptr<cuda_rt::DeviceBuffer> summaries_;  // check_transfers: [world] out, [world] in
};

}  // namespace

std::unique_ptr<BackendImpl> make_nccl_backend(GroupContext& ctx, const std::string& why) {
  return std::make_unique<NcclBackend>(ctx, why);
}

}  // namespace actorcc
