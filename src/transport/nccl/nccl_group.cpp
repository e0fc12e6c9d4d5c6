#include "transport/nccl/nccl_group.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <future>
#include <thread>
#include <sstream>

#include "bootstrap/outcomes.hpp"
#include "common/cuda_owners.hpp"
#include "common/log.hpp"
#include "transport/nccl/nccl_watch.hpp"

namespace actorcc::nccl {

namespace {

// How long close() waits for ncclCommDestroy (~NcclGroup says why it may never return).
constexpr std::chrono::milliseconds kDestroyWait(5000);
double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

std::string describe(const std::string& what, const std::vector<int>& members) {
  std::ostringstream os;
  os << what << " (ranks ";
  for (size_t i = 0; i < members.size(); ++i) os << (i ? ", " : "") << members[i];
  os << ")";
  return os.str();
}
}  // namespace

std::shared_ptr<NcclGroup> NcclGroup::join(GroupContext& ctx, const std::vector<int>& members,
                                           const std::string& what) {
  std::shared_ptr<NcclGroup> g(new NcclGroup());
  g->abort_ = ctx.abort;
  g->members_ = members;
  g->what_ = describe(what, members);
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i] == ctx.rank) g->nccl_rank_ = static_cast<int>(i);
  const bool in = g->nccl_rank_ >= 0;
  // Every rank reports whether it has a device and an NCCL before any rank goes on: a rank that
  // threw here alone would skip the id exchange, and the ranks' next exchanges would pair up
  // wrongly (the others taking its failure report for NCCL's id, then waiting in NCCL's setup).
  std::string id, err;
  try {
    cuda_rt::check(cudaSetDevice(ctx.options.device), "cudaSetDevice", ctx.rank);
    g->lib_ = NcclLib::load(default_library());
    if (g->nccl_rank_ == 0) id = g->lib_->unique_id();
  } catch (const std::exception& e) {
    err = Outcomes::reason(e);
  }
  const auto ready = Outcomes::gather_result(*ctx.bootstrap, err, id, Deadline::after(ctx.options.join_timeout));
  if (!ready.all_ok()) throw NcclError("not usable on every rank: " + ready.reasons());
  if (!in) return g;
  // NCCL's setup is bounded (NcclLib::init_rank with a wait), so a rank that never reaches it
  // or fails in it cannot leave the others waiting forever: every rank waits within the join
  // timeout and the group's abort, and a rank whose setup fails aborts the group, which ends
  // the others' waits at once with its reason.
  NcclWait wait{ctx.options.join_timeout, [abort = ctx.abort] { abort->throw_if_raised(); }, ctx.rank};
  const auto t0 = std::chrono::steady_clock::now();
  try {
    g->comm_ = g->lib_->init_rank(static_cast<int>(members.size()), ready.text(members.front()), g->nccl_rank_, wait);
  } catch (const std::exception& e) {
    ctx.abort_group("NCCL setup of " + g->what_ + " failed: " + e.what());
    throw;
  }
  g->init_ms_ = ms_since(t0);
  // The watch is stopped first in the destructor, so its thread may use the group directly.
  NcclGroup* self = g.get();
  g->watch_ = std::make_unique<NcclWatch>(ctx.abort, ctx.rank, ctx.options.device, ctx.options.timeout, g->what_,
                                          [self] {
                                            std::lock_guard<std::mutex> l(self->mu_);
                                            return self->comm_ ? self->comm_->async_error() : std::string();
                                          });
  std::weak_ptr<NcclGroup> weak = g;
  ctx.abort->on_raise([weak] {
    // ncclCommAbort unblocks NCCL kernels waiting for a rank that is gone.
    if (auto s = weak.lock()) {
      std::lock_guard<std::mutex> l(s->mu_);
      if (s->comm_) s->comm_->abort();
      s->comm_.reset();
      s->aborted_ = true;
    }
  });
  const auto t1 = std::chrono::steady_clock::now();
  try {
    g->connect(ctx);
  } catch (const std::exception& e) {
    if (!ctx.abort->raised()) ctx.bootstrap->abort("NCCL connection of " + g->what_ + " failed: " + e.what());
    throw;
  }
  g->connect_ms_ = ms_since(t1);
  return g;
}

// NCCL connects a communicator's channels on the first call of each algorithm, not in
// ncclCommInitRank (NCCL_RUNTIME_CONNECT, default on since 2.22): a 1-element all_reduce (the
// tree or ring a small all_reduce takes) and all_gather (the ring) make those connections part
// of this bounded set-up, so a caller's first collective pays only its own time. The wait is
// bounded like any call's: the watch aborts the group on the call timeout or NCCL's async
// error, and ncclCommAbort ends the kernels, so the synchronisation returns.
void NcclGroup::connect(GroupContext& ctx) {
  const size_t world = members_.size();
  cuda_rt::Stream s;
  cuda_rt::DeviceBuffer buf((world + 1) * sizeof(float));
  float* p = static_cast<float*>(buf.get());
  call("ncclAllReduce + ncclAllGather (connecting the channels)", s.get(), [&](NcclComm& c) {
    c.run(Collective::AllReduce, p, p, 1, DataType::Float32, RedOp::Sum, 0, s.get());
    c.run(Collective::AllGather, p, p + 1, 1, DataType::Float32, RedOp::Sum, 0, s.get());
  });
  cuda_rt::check(cudaStreamSynchronize(s.get()), "cudaStreamSynchronize", ctx.rank);
  ctx.abort->throw_if_raised();
}

NcclGroup::~NcclGroup() {
  watch_.reset();  // its thread polls the communicator: stop it first
  std::unique_ptr<NcclComm> comm;
  {
    std::lock_guard<std::mutex> l(mu_);
    comm = std::move(comm_);
  }
  if (!comm) return;
  // ncclCommDestroy waits until every CUDA graph that captured a call of this communicator has
  // been destroyed (NCCL's commDestroySync polls its callbacks while persistentRefs != 0): a
  // close() with a graph alive, as torch and vLLM programs keep them at shutdown, never returned.
  // So the destroy runs on a thread of its own (holding the library), and close() waits for it
  // a bounded time only; a destroy still waiting then finishes when the graphs go, or never,
  // and the process may exit meanwhile. The graph itself must not be replayed after close():
  // the group and its buffers are gone (docs/reliability.md, "close() and live CUDA graphs").
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread([c = std::move(comm), lib = lib_, done]() mutable {
    c.reset();
    done->set_value();
  }).detach();
  if (finished.wait_for(kDestroyWait) != std::future_status::ready)
    LOG_WARN("NCCL communicator of " << what_ << ": ncclCommDestroy has not returned within "
                                     << kDestroyWait.count() / 1000
                                     << " s (a CUDA graph that captured its calls is still alive?): close() goes on, "
                                        "and the destroy finishes in the background once the graphs are destroyed");
}

void NcclGroup::track(const char* call, void* stream) {
  if (watch_) watch_->track(call, stream);
}

}  // namespace actorcc::nccl
