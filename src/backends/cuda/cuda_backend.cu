// The CUDA backend: one rank per GPU, ranks of a node share VMM workspaces (transport/ipc) and
// run the NVLink kernels of src/algorithms/cuda/*.cu on the caller's stream. No host
// synchronisation per call; kernel failures (timeout, abort, mismatch) are left in host-mapped
// memory, where a watchdog thread finds them within kWatchdogPeriod even if no call follows: it
// sets the communicator's error (every later call, check(), synchronize() and Work.wait()
// raise it) and aborts the group through the bootstrap, so every rank learns of it.
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "algorithms/cuda/launch.hpp"
#include "algorithms/cuda/planner.hpp"
#include "algorithms/p2p_plan.hpp"
#include "backends/cuda/cuda_settings.hpp"
#include "bootstrap/outcomes.hpp"
#include "common/cuda_owners.hpp"
#include "common/deadline.hpp"
#include "common/log.hpp"
#include "common/watchdog.hpp"
#include "group/call_desc.hpp"
#include "backends/backend.hpp"
#include "topology/topology.hpp"
#include "transport/ipc/driver_api.hpp"
#include "transport/ipc/registered_buffers.hpp"
#include "transport/ipc/workspace.hpp"

namespace actorcc {
namespace {

using cuda::CallArgs;
using cuda::DeviceComm;
using cuda::Tuning;

static_assert(cuda::kMaxBlocks == cuda::kMaxCtaSetting, "the CTA-count settings' bound is the kernels' row count");

// The launch column of the route table (algorithms/cuda/routes.hpp), in Route order.
constexpr cuda::Launch kLaunch[] = {
#define ACTORCC_ROUTE_LAUNCH(e, name, coll, cond) &cuda::name,
    ACTORCC_CUDA_ROUTES(ACTORCC_ROUTE_LAUNCH)
#undef ACTORCC_ROUTE_LAUNCH
};

using cuda_rt::check;
using cuda_rt::DeviceGuard;

// How often the watchdog reads the kernels' error record: a failed kernel's group hears of it
// within this (plus one bootstrap message) even when no further call is made.
constexpr std::chrono::milliseconds kWatchdogPeriod{100};

constexpr size_t kP2PSeqWords = size_t(2) * cuda::kMaxRanks * cuda::kP2PChannels;
// The device counters: [kMaxBlocks] step counters, then the abort-poll timestamp and the device
// abort copy, then the error record's claim, the point-to-point message counts
// (DeviceComm::p2p_seq) and the call count (DeviceComm::call_seq).
constexpr size_t kCounterBytes = (cuda::kMaxBlocks + 3 + kP2PSeqWords + 1) * sizeof(unsigned long long);

// The host-mapped words every kernel of the group sees: [0] abort (host -> device), [4..15] the
// error record (device -> host: kernels/device_comm.cuh KernelError).
struct HostWords : cuda_rt::HostMappedWords {
  HostWords() : cuda_rt::HostMappedWords((4 + cuda::kErrorWords) * sizeof(int)) {}
  volatile int* abort_word() const { return host(); }
  volatile int* error() const { return host() + 4; }
};

// Two ranks on one GPU each spin in kernels that the GPU time-slices between the processes (no
// concurrency without MPS): every wait for the other rank lasts until the GPU switches, so such a
// group is refused unless rank 0 allowed it (ACTORCC_CUDA_SHARE_GPU, for tests that run more
// ranks than there are GPUs). Every rank decides from the same peer table and rank 0's setting.
void refuse_shared_gpu(const GroupContext& ctx, bool allowed) {
  const auto [r, q] = topology::shared_gpu(ctx.peers);
  if (r < 0) return;
  // Ranks of one process on one GPU import each other's workspace into the process that made
  // it: not a layout the backend supports (a device run of 3 such ranks gave wrong products), so
  // it is refused even where sharing is allowed. Ranks of one process on different GPUs are fine.
  if (const auto [a, b] = topology::shared_gpu(ctx.peers, true); a >= 0)
    throw UnsupportedError("ranks " + std::to_string(a) + " and " + std::to_string(b) + " are one process (pid " +
                               std::to_string(ctx.peers[a].pid) + ") on one GPU " + ctx.peers[a].gpu_uuid +
                               "; the CUDA backend needs one GPU per rank of a process",
                           ctx.rank);
  const std::string& gpu = ctx.peers[r].gpu_uuid;
  if (!allowed)
    throw UnsupportedError("ranks " + std::to_string(r) + " and " +
                               std::to_string(q) + " share GPU " + gpu +
                               "; the CUDA backend needs one GPU per rank (ACTORCC_CUDA_SHARE_GPU=1 allows it for "
                               "tests, time-sliced and slow)",
                           ctx.rank);
  LOG_WARN("rank " << ctx.rank << ": ranks " << r << " and " << q << " share GPU " << gpu
                   << " (ACTORCC_CUDA_SHARE_GPU): calls wait for the GPU to switch processes");
}

// The calls that run as transfers on per-pair channels (algorithms/cuda/p2p_push.cu).
bool is_p2p_per_pair(Collective c) {
  return is_point_to_point(c) || c == Collective::AllToAllV;
}

class CudaBackend final : public BackendImpl {
 public:
  explicit CudaBackend(GroupContext& ctx) : ctx_(ctx), device_(ctx.options.device) {
    if (device_ < 0) check(cudaGetDevice(&device_), "cudaGetDevice");
    if (ctx.world == 1) return;  // a one-rank group only copies; nothing to share
    if (ctx.num_nodes > 1)
      throw UnsupportedError("the CUDA backend serves one node; this group spans " + std::to_string(ctx.num_nodes) +
                                 " nodes (the inter-node NCCL rail transport is not built yet)",
                             ctx.rank);
    if (ctx.world > cuda::kMaxRanks)
      throw UnsupportedError("the CUDA backend supports up to " + std::to_string(cuda::kMaxRanks) + " ranks per node");
    Deadline dl = Deadline::after(ctx.options.join_timeout);

    // Local preparation; failures are shared so every rank throws together (same bootstrap calls).
    std::string err;
    cuda::Settings mine;
    try {
      check(cudaSetDevice(device_), "cudaSetDevice");
      const auto& drv = ipc::DriverApi::get();
      if (!drv.ok) throw CudaError("CUDA driver API unavailable: " + drv.error);
      int sms = 0;
      check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_), "cudaDeviceGetAttribute");
      mine = cuda::Settings::local(ctx.options, sms);
      words_ = std::make_shared<HostWords>();
      counters_ = std::make_unique<cuda_rt::DeviceBuffer>(kCounterBytes);
      order_event_ = std::make_unique<cuda_rt::Event>();
    } catch (const std::exception& e) {
      err = Outcomes::reason(e);
    }
    const auto all = Outcomes::gather_result(*ctx.bootstrap, err, mine.encode(), dl);
    if (!all.all_ok())
      throw UnsupportedError("CUDA setup failed on " + all.reasons(), ctx.rank);
    int min_blocks = cuda::kMaxBlocks;
    for (int r = 0; r < ctx.world; ++r)
      min_blocks = std::min(min_blocks, cuda::Settings::decode(all.text(r)).tune.data_blocks);
    agreed_ = cuda::Settings::decode(all.text(0));
    agreed_.tune.data_blocks = std::max(1, min_blocks);
    bool known = true;
    forced_ = cuda::forced_route(agreed_.algo, known);
    if (!known)
      LOG_WARN("rank " << ctx.rank << ": algorithm '" << agreed_.algo
                       << "' is not a CUDA all-reduce algorithm; using the planner");
    refuse_shared_gpu(ctx, agreed_.tune.share_gpu != 0);
    const int W = ctx.world, NB = agreed_.tune.data_blocks;
    DeviceComm& d = dc_;
    d.rank = ctx.rank;
    cuda::WorkspaceShape shape;
    shape.world = W;
    shape.data_blocks = NB;
    shape.push_bytes = agreed_.workspace_bytes;
    shape.ll_blocks = agreed_.tune.ll_blocks;
    shape.ll_slot_bytes = agreed_.ll_slot_bytes;
    shape.ll128_blocks = agreed_.tune.ll128_blocks;
    shape.ll128_bytes = agreed_.tune.ll128_bytes;
    const size_t total = cuda::lay_out_workspace(d, shape);
    ws_bytes_ = total;

    ws_ = ipc::SharedWorkspace::create(ctx, device_, total);
    bind_memory();
    d.abort_word = words_->dev();
    d.error = words_->dev() + 4;
    // Saturating: an infinite timeout (milliseconds::max()) must not wrap to a short one.
    d.timeout_ns = static_cast<unsigned long long>(ctx.options.timeout.count()) >= ~0ull / 1000000ull
                       ? ~0ull
                       : static_cast<unsigned long long>(ctx.options.timeout.count()) * 1000000ull;
    d.mutation = mutation_from_env();  // test-only build; 0 in every other (common/mutation.hpp)
    if (d.mutation) LOG_WARN("rank " << ctx.rank << ": test-only kernel mutation " << d.mutation << " is active");
    d.abort_poll_ns = static_cast<unsigned long long>(mine.own.abort_poll_us) * 1000ull;

    std::weak_ptr<HostWords> w = words_;
    ctx.abort->on_raise([w] {
      if (auto p = w.lock()) *p->abort_word() = 1;
    });
    watchdog_ = std::make_unique<Watchdog>(kWatchdogPeriod, [this] { return take_device_error(); });
    LOG_INFO("rank " << ctx.rank << ": CUDA backend on device " << device_ << ", workspace " << (total >> 20)
                     << " MiB shared by " << ws_->mode() << ", " << NB << " CTAs, tile " << d.tile_bytes << " B");
  }

  ~CudaBackend() override {
    watchdog_.reset();  // before anything it reads goes
    int prev = -1;
    if (cudaGetDevice(&prev) == cudaSuccess && prev != device_) cudaSetDevice(device_);
    // Kernels still queued may use the workspace: let them finish (or fail) before unmapping.
    if (ws_) cudaDeviceSynchronize();
    if (prev >= 0 && prev != device_) cudaSetDevice(prev);
    cudaGetLastError();
  }

  Backend kind() const override { return Backend::Cuda; }

  void poll_errors() override { check_device_errors(); }

  // Bounded without a deadline of its own: every kernel's waits are (timeout, abort word), and
  // an abort of the group raises this rank's abort word at once.
  void synchronize(void* stream) override {
    DeviceGuard guard(device_);
    const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    check_device_errors();
    check(e, "cudaStreamSynchronize");
  }
  int device() const override { return device_; }

  std::string plan(Collective c, size_t bytes, bool registered_output) const override {
    if (!cuda::has_route(c)) return "none";  // refused by run()
    return cuda::route_name(cuda::pick_route(cuda::plan_args(c, bytes, registered_output, ctx_.world), agreed_.tune, forced_));
  }

  void run(const CollArgs& a) override {
    check_device_errors();
    if (!cuda::has_route(a.coll))
      throw UnsupportedError(std::string(to_string(a.coll)) +
                                 " is not available on the CUDA backend's NVLink path yet (the CPU backend and "
                                 "groups that NCCL carries have it)",
                             ctx_.rank);
    // A collective with nothing to move still meets its peers once: it runs as the barrier
    // kernel with its own descriptor, so the call check compares it with the peers' call (a
    // count-0 call that returned at once would let this rank's next call pair with the peers'
    // current one). Point-to-point calls move their empty transfers themselves.
    const bool empty = a.coll != Collective::Barrier && !is_p2p_per_pair(a.coll) && a.count == 0;
    if (empty && ctx_.world == 1) return;
    DeviceGuard guard(device_);
    // Buffers a call does not use on this rank may be null: gather's and reduce's output and
    // scatter's input off the root.
    if (a.coll != Collective::Barrier && !empty) {
      if (a.send) check_buffer(a.send, "send", a);
      if (a.recv) check_buffer(a.recv, "recv", a);
    }
    auto stream = static_cast<cudaStream_t>(a.stream);
    CallArgs ca;
    ca.send = a.send;
    ca.recv = a.recv;
    ca.count = a.count;
    ca.dtype = a.dtype;
    ca.op = a.op;
    ca.root = a.root;
    ca.coll = static_cast<int>(a.coll);
    ca.stream = stream;
    // What the routes' conditions look at; `bytes` as plan() takes it (reduce_scatter /
    // all_gather, all_to_all, gather, scatter: the full buffer, world x count elements).
    cuda::RouteArgs ra;
    ra.coll = empty ? Collective::Barrier : a.coll;
    ra.esz = dtype_size(a.dtype);
    const bool per_rank = a.coll == Collective::ReduceScatter || a.coll == Collective::AllGather ||
                          a.coll == Collective::AllToAll || a.coll == Collective::Gather || a.coll == Collective::Scatter;
    ra.bytes = a.count * ra.esz * (per_rank ? ctx_.world : 1);
    ra.world = ctx_.world;
    ra.addr = reinterpret_cast<uintptr_t>(a.send) | reinterpret_cast<uintptr_t>(a.recv);
    const ipc::RegisteredBuffers::Entry* reg = nullptr;
    if (a.coll == Collective::AllReduce && !empty && ctx_.world > 1) {
      reg = registered_.find(a.recv, ra.bytes);
      ra.registered = reg != nullptr;
      describe_call(ca, reg, ra.bytes);
    }
    // Send, recv, batches, all_to_all_v: this rank's transfers, as the kernel takes them.
    std::unique_ptr<cuda::P2PBatch> batch;
    if (is_p2p_per_pair(a.coll)) {
      batch = std::make_unique<cuda::P2PBatch>(cuda::build_p2p_batch(p2p_transfers(a, ctx_.rank, ctx_.world), ctx_.rank));
      for (int i = 0; i < batch->lane_begin[batch->nlanes]; ++i) {
        const cuda::P2PTask& t = batch->task[i];
        if (t.nbytes == 0) continue;
        if (t.src) check_buffer(t.src, "send", a);
        if (t.dst) check_buffer(t.dst, "recv", a);
      }
      ca.batch = batch.get();
    }
    const cuda::Route route = cuda::pick_route(ra, agreed_.tune, forced_);
    // A one-rank group has no workspace to order: its copy runs on the caller's stream alone.
    const bool ordered = route != cuda::Route::Copy;
    const bool capturing = ordered && is_capturing(stream);
    // The stream's id, taken once for the wait and the record (none: a capture, which does neither)
    const std::optional<unsigned long long> sid =
        ordered && !capturing ? std::optional<unsigned long long>(stream_id(stream)) : std::nullopt;
    if (sid) order_after_previous(stream, *sid);
    // The collectives carry their descriptor in their flags (kernels/call_check.hpp); the
    // point-to-point calls check their own headers.
    DeviceComm dc = dc_;
    if (agreed_.tune.call_check && !batch && route != cuda::Route::Copy) {
      const CallDesc cd = CallDesc::of(a);
      std::memcpy(dc.call_desc, &cd, sizeof cd);
      dc.call_hash = cuda::call_hash(dc.call_desc[0], dc.call_desc[1]);
    }
    check(kLaunch[static_cast<size_t>(route)](dc, agreed_.tune, ca),
       "launching CUDA " + std::string(to_string(a.coll)) + " (" + cuda::route_name(route) + ")");
    if (sid) mark_ordered(stream, *sid);
  }

  // Suspend releases the GPU memory this backend allocated: the VMM workspace with this
  // process's mappings of every peer's (a peer's memory is freed once its owner and every
  // importer have let go, which every rank does here after the core's barrier) and the device
  // counters. Resume makes both again, zeroed, on every rank, and re-exchanges the workspace's
  // handles: the flags' epochs and the call counts restart together, as on a new group. Kept:
  // the host-mapped words (host memory), the event that orders calls, registered buffers (the
  // caller's memory, mapped by legacy IPC handles that stay valid).
  bool can_suspend() const override { return true; }
  void quiesce() override {
    DeviceGuard guard(device_);
    const cudaError_t e = cudaDeviceSynchronize();  // every stream's kernels of this group
    check_device_errors();
    check(e, "cudaDeviceSynchronize (suspend)");
  }
  void suspend() override {
    if (ctx_.world == 1) return;  // nothing shared, nothing allocated
    DeviceGuard guard(device_);
    ws_.reset();
    counters_.reset();
    bind_memory();
  }
  void resume() override {
    if (ctx_.world == 1 || ws_) return;
    DeviceGuard guard(device_);
    const Deadline dl = Deadline::after(ctx_.options.join_timeout);
    // Shared before the workspace's exchange, so a rank whose allocation fails does not leave
    // the others waiting in it.
    std::string err;
    try {
      counters_ = std::make_unique<cuda_rt::DeviceBuffer>(kCounterBytes);
    } catch (const std::exception& e) {
      err = Outcomes::reason(e);
    }
    const auto all = Outcomes::gather_error(*ctx_.bootstrap, err, dl);
    if (!all.all_ok()) {
      counters_.reset();
      throw CudaError("allocating the CUDA backend's counters failed on " + all.reasons(), ctx_.rank, all.ranks().front());
    }
    ws_ = ipc::SharedWorkspace::create(ctx_, device_, ws_bytes_);  // zeroes it, then synchronizes the device
    bind_memory();
  }
  MemoryStats memory() const override {
    MemoryStats m;
    if (ws_) m.suspendable_bytes = ws_->size() + kCounterBytes;
    return m;
  }

  // Registered outputs let the pipelined two-shot's all-gather store into the peers' outputs
  // (transport/ipc/registered_buffers.hpp); everything else reads and writes user buffers
  // directly anyway. Both calls are collective.
  void register_buffer(void* ptr, size_t bytes) override {
    if (ctx_.world == 1) return;
    DeviceGuard guard(device_);
    registered_.add(ctx_, ptr, bytes);
  }
  void deregister_buffer(void* ptr) override {
    if (ctx_.world == 1) return;
    DeviceGuard guard(device_);
    // Our kernels may still store into the peers' buffers; every rank syncs before the
    // all-gather inside remove(), so after it no kernel anywhere uses the mappings.
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (deregister_buffer)");
    registered_.remove(ctx_, ptr);
  }

 private:
  // Rejects a buffer this device's kernels cannot address (plain host memory, another GPU's
  // memory) before anything is launched: a kernel touching it would fault and poison the CUDA
  // context for every later call. Validated pointers are remembered, so the buffers a training
  // loop reuses cost one lookup each.
  void check_buffer(const void* p, const char* which, const CollArgs& a) {
    for (const void* q : checked_)
      if (q == p) return;
    cudaPointerAttributes attr{};
    cudaError_t e = cudaPointerGetAttributes(&attr, p);
    std::string where = std::string(to_string(a.coll)) + ": " + which +
                        " buffer ";
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw InvalidArgument(where + "is not CUDA-accessible memory (" + cudaGetErrorString(e) + ")", ctx_.rank);
    }
    if (attr.type == cudaMemoryTypeUnregistered)
      throw InvalidArgument(where + "is ordinary host memory; pass device memory of CUDA device " +
                                std::to_string(device_) + " (or pinned, mapped host memory)",
                            ctx_.rank);
    if (attr.type == cudaMemoryTypeDevice && attr.device != device_)
      throw InvalidArgument(where + "is on CUDA device " + std::to_string(attr.device) +
                                " but this communicator uses device " + std::to_string(device_),
                            ctx_.rank);
    checked_[next_checked_++ % checked_.size()] = p;
  }

  // The workspace's and counters' addresses in the kernels' handle (null while suspended).
  void bind_memory() {
    DeviceComm& d = dc_;
    for (int r = 0; r < cuda::kMaxRanks; ++r)
      d.ws[r] = ws_ && r < ctx_.world ? static_cast<char*>(ws_->peer(r)) : nullptr;
    d.counters = counters_ ? static_cast<unsigned long long*>(counters_->get()) : nullptr;
    d.abort_poll = d.counters ? d.counters + cuda::kMaxBlocks : nullptr;
    d.error_claim = d.abort_poll ? d.abort_poll + 2 : nullptr;
    d.p2p_seq = d.error_claim ? d.error_claim + 1 : nullptr;
    d.call_seq = d.p2p_seq ? d.p2p_seq + kP2PSeqWords : nullptr;
  }

  // A kernel that gave up (timeout, abort, mismatch) left a record in host-mapped memory: turn
  // it into the group's error and throw it.
  void check_device_errors() {
    if (take_device_error()) ctx_.abort->rethrow();
  }

  // The record, if any, becomes the communicator's error (first cause wins, as everywhere). A
  // timeout or a mismatch this rank's kernel found is also sent to every rank through the
  // bootstrap: the ranks that are not waiting on the culprit (or are the culprit) would
  // otherwise learn of it only at their own timeout or never. An abort the kernel merely
  // obeyed came from the group already. Called by the watchdog thread and by calls; true
  // once a record was found.
  bool take_device_error() {
    if (!words_) return false;
    volatile int* e = words_->error();
    // No record: every call and every poll of the watchdog (torch's polls once per pending
    // Work) ends here, without the lock, so the two never wait for each other.
    if (e[0] == cuda::kErrNone) return false;
    // The watchdog and a call may find the record together: the one that reports it finishes
    // telling the group before the other returns (a caller that exits on the error must not
    // cut the bootstrap message short).
    std::lock_guard<std::mutex> g(error_mu_);
    const int code = e[0];
    if (code == cuda::kErrNone) return false;
    // The kernel's peer is a rank of this backend's group; errors name the whole group's rank
    // (they differ where this backend serves one node of a larger group).
    const int peer = ctx_.global_rank(e[1]), coll = e[2];
    std::string what(to_string(static_cast<Collective>(coll)));  // the kernel's record; "invalid" if garbled
    if (coll < 0 || what == "invalid") what = "collective";
    const std::string me = "rank " + std::to_string(ctx_.global_rank(ctx_.rank)) + ": ";
    std::string msg;
    if (code == cuda::kErrTimeout) {
      msg = me + "CUDA " + what + " timed out after " + std::to_string(ctx_.options.timeout.count()) +
            " ms waiting for rank " + std::to_string(peer);
      ctx_.abort->raise(peer, ErrorCode::Timeout, msg);
    } else if (code == cuda::kErrMismatch && is_p2p_per_pair(static_cast<Collective>(coll))) {
      msg = me + "CUDA " + what + ": rank " + std::to_string(peer) + " and rank " +
            std::to_string(ctx_.global_rank(ctx_.rank)) +
            " disagree on a transfer between them (its count or dtype differs, or one has a transfer the other "
            "lacks); nothing was written into the receiver's buffer";
      ctx_.abort->raise(peer, ErrorCode::InvalidArgument, msg);
    } else if (code == cuda::kErrMismatch && (e[4] | e[5] | e[6] | e[7]) != 0) {
      // The call check's record: both ranks' descriptors (kernels/call_check.hpp).
      msg = me + "CUDA " + what + ": rank " + std::to_string(peer) + " called " + recorded_desc(e + 4).text() +
            ", rank " + std::to_string(ctx_.global_rank(ctx_.rank)) + " called " + recorded_desc(e + 8).text() +
            " (ranks must make the same collective calls in the same order)";
      ctx_.abort->raise(peer, ErrorCode::InvalidArgument, msg);
    } else if (code == cuda::kErrMismatch) {
      msg = me + "CUDA " + what + ": rank " + std::to_string(peer) +
            " called it with a different count, type or op, or with an output that is not the same registered "
            "buffer at the same offset (and alignment) as rank " +
            std::to_string(ctx_.global_rank(ctx_.rank)) + "'s; nothing was written into another rank's output";
      ctx_.abort->raise(peer, ErrorCode::InvalidArgument, msg);
    } else {
      // The kernel obeyed an abort whose reason may still be on its way (the rank that found
      // the cause tells the group through the bootstrap): wait a moment for it, so the error
      // names the cause rather than only the abort.
      ctx_.abort->wait_until(Deadline::after(std::chrono::milliseconds(1000)));
      ctx_.abort->raise(peer, ErrorCode::Remote, me + "CUDA " + what + " stopped: the group was aborted");
    }
    if (!msg.empty() && !told_group_.exchange(true)) {
      LOG_ERROR(msg << " (the call's output is incomplete; this communicator now raises this error)");
      ctx_.bootstrap->abort(msg, peer);  // every rank's error names the peer as culprit
    }
    return true;
  }

  // A descriptor of the error record: two 64-bit words as four ints (kernels/device_comm.cuh).
  static CallDesc recorded_desc(const volatile int* w) {
    uint32_t u[4];
    for (int i = 0; i < 4; ++i) u[i] = static_cast<uint32_t>(w[i]);
    CallDesc d;
    std::memcpy(&d, u, sizeof d);
    return d;
  }

  // Calls must run in order on the device (they share workspace slots and step counters).
  // Each eager call records order_event_ on its stream when it is launched; a call on another
  // stream waits for that event first. The previous stream itself is never touched again: the
  // caller may have destroyed it since (a stream per call is common in C callers), and CUDA
  // may crash on a destroyed stream's handle. Streams are told apart by CUDA's stream id, as
  // a new stream may reuse a destroyed one's handle. A capture neither waits (it may not
  // depend on work outside it) nor records (an event recorded inside a capture cannot be
  // waited on eagerly), so the order runs from the last eager call around any captured ones.
  static bool is_capturing(cudaStream_t s) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess) {
      cudaGetLastError();
      return false;  // the launch on it reports the stream's problem
    }
    return cs != cudaStreamCaptureStatusNone;
  }
  static unsigned long long stream_id(cudaStream_t s) {
    unsigned long long id = 0;
    check(cudaStreamGetId(s, &id), "cudaStreamGetId");
    return id;
  }
  void order_after_previous(cudaStream_t s, unsigned long long sid) {
    if (!last_stream_ || sid == *last_stream_) return;
    check(cudaStreamWaitEvent(s, order_event_->get(), 0), "cudaStreamWaitEvent");
  }
  void mark_ordered(cudaStream_t s, unsigned long long sid) {
    check(cudaEventRecord(order_event_->get(), s), "cudaEventRecord");
    last_stream_ = sid;
  }

  // The pipelined two-shot's call descriptor (equal on every rank for a well-formed call) and,
  // for a registered output, where each peer's output is mapped here.
  static void describe_call(cuda::CallArgs& ca, const ipc::RegisteredBuffers::Entry* reg, size_t bytes) {
    auto mix = [](unsigned long long x) {  // splitmix64 finalizer
      x ^= x >> 30;
      x *= 0xbf58476d1ce4e5b9ull;
      x ^= x >> 27;
      x *= 0x94d049bb133111ebull;
      return x ^ (x >> 31);
    };
    unsigned long long h = mix(bytes ^ (static_cast<unsigned long long>(ca.dtype) << 48) ^
                               (static_cast<unsigned long long>(ca.op) << 56));
    if (reg) {
      const size_t off = static_cast<const char*>(ca.recv) - reg->local;
      h = mix(h ^ mix(reg->id) ^ (off << 4) ^ (reinterpret_cast<uintptr_t>(ca.recv) & 15));
      for (size_t q = 0; q < reg->peer.size(); ++q) ca.direct.p[q] = reg->peer[q] + off;
    }
    ca.desc = h | 1;  // never 0, the value of a word no call has written
  }

  GroupContext& ctx_;
  int device_ = -1;
  cuda::Settings agreed_;  // rank 0's, data_blocks the smallest of every rank's
  std::optional<cuda::Route> forced_;
  DeviceComm dc_{};
  std::shared_ptr<HostWords> words_;
  std::unique_ptr<cuda_rt::DeviceBuffer> counters_;
  std::unique_ptr<ipc::SharedWorkspace> ws_;  // null while suspended
  size_t ws_bytes_ = 0;                       // what resume() allocates again
  ipc::RegisteredBuffers registered_;
  std::unique_ptr<cuda_rt::Event> order_event_;
  std::optional<unsigned long long> last_stream_;  // the last eager call's stream id
  std::array<const void*, 8> checked_{};
  size_t next_checked_ = 0;
  std::mutex error_mu_;                   // take_device_error: one reporter at a time
  std::atomic<bool> told_group_{false};  // the bootstrap abort went out (once)
  std::unique_ptr<Watchdog> watchdog_;   // last: stopped first, before what it reads
};

}  // namespace

bool cuda_usable(int device) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return false;
  }
  return device < n;
}

std::unique_ptr<BackendImpl> make_cuda_backend(GroupContext& ctx) { return std::make_unique<CudaBackend>(ctx); }

}  // namespace actorcc
