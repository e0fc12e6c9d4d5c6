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

#include "algorithms/p2p_check.hpp"
#include "algorithms/p2p_plan.hpp"
#include "bootstrap/outcomes.hpp"
#include "common/cuda_owners.hpp"
#include "common/deadline.hpp"
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
    std::unique_lock<std::mutex> g(state_->mu);
    if (!state_->comm) ctx_.abort->rethrow();
    if (a.coll == Collective::Barrier) {
      // NCCL has no barrier: a one-element all-reduce orders the ranks on the stream.
      state_->comm->run(Collective::AllReduce, scratch_, scratch_, 1, DataType::Int32, RedOp::Sum, 0, a.stream);
      return;
    }
    if (is_p2p_based(a.coll)) {
      // Sends and receives in one NCCL group. NCCL does not compare a send's size with the
      // matching recv's; checked mode does, before anything moves (check_transfers).
      const std::vector<P2POp> ops = p2p_transfers(a, ctx_.rank, ctx_.world);
      if (ctx_.options.checked) {
        const Refusal r = check_transfers(a, ops);
        if (!r.why.empty()) {
          g.unlock();  // the group's abort takes the lock to abort NCCL
          ctx_.abort->raise(r.peer, r.code, r.why);
          ctx_.abort->rethrow();
        }
      }
      std::vector<nccl::NcclComm::Transfer> xs;
      for (const P2POp& op : ops) xs.push_back({op.kind == P2POp::Kind::Send, op.buf, op.count, op.dtype, op.peer});
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
    state_->comm->transfers(xs, stream);
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
  std::shared_ptr<NcclState> state_;
  int device_ = 0;
  void* scratch_ = nullptr;
  std::unique_ptr<cuda_rt::DeviceBuffer> summaries_;  // check_transfers: [world] out, [world] in
};

}  // namespace

std::unique_ptr<BackendImpl> make_nccl_backend(GroupContext& ctx, const std::string& why) {
  return std::make_unique<NcclBackend>(ctx, why);
}

}  // namespace actorcc
