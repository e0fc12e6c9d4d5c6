// The CUDA backend: one rank per GPU, ranks of a node share VMM workspaces (transport/ipc) and
// run the NVLink kernels of src/algorithms/cuda_*.cu on the caller's stream. No host
// synchronisation per call; kernel failures (timeout, abort) are left in host-mapped memory
// and turned into exceptions by the next call on the host.
#include <cuda_runtime.h>

#include <array>
#include <cstring>
#include <memory>
#include <sstream>

#include "algorithms/cuda_algorithms.hpp"
#include "bootstrap/outcomes.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "core/backend.hpp"
#include "core/cuda_planner.hpp"
#include "topology/topology.hpp"
#include "transport/ipc/driver_api.hpp"
#include "transport/ipc/registered_buffers.hpp"
#include "transport/ipc/workspace.hpp"

namespace actorcc {
namespace {

using cuda::CallArgs;
using cuda::DeviceComm;
using cuda::Tuning;

void ck(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw CudaError(what + ": " + cudaGetErrorString(e));
  }
}

// Host-mapped words: [0] abort (host -> device), [4..7] error record (device -> host).
struct HostWords {
  int* host = nullptr;
  int* dev = nullptr;
  HostWords() {
    ck(cudaHostAlloc(reinterpret_cast<void**>(&host), 64, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
    std::memset(host, 0, 64);
    ck(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), host, 0), "cudaHostGetDevicePointer");
  }
  ~HostWords() {
    if (host) cudaFreeHost(host);
  }
  HostWords(const HostWords&) = delete;
  HostWords& operator=(const HostWords&) = delete;
  volatile int* abort_word() const { return host; }
  volatile int* error() const { return host + 4; }
};

// Owns a cudaMalloc'd range.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t n) {
    ck(cudaMalloc(&p, n), "cudaMalloc");
    ck(cudaMemset(p, 0, n), "cudaMemset");
  }
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Restores the caller's current device.
struct DeviceGuard {
  int prev = -1;
  explicit DeviceGuard(int dev) {
    if (cudaGetDevice(&prev) == cudaSuccess && prev != dev) ck(cudaSetDevice(dev), "cudaSetDevice");
    else prev = -1;
  }
  ~DeviceGuard() {
    if (prev >= 0) cudaSetDevice(prev);
  }
};

size_t env_size(const char* name, size_t dflt) {
  auto v = env::get_int(name);
  return v && *v > 0 ? static_cast<size_t>(*v) : dflt;
}

// Everything every rank must agree on (rank 0's values are used by all).
struct Agreed {
  Tuning tune;
  std::string algo;
  size_t workspace_bytes = 0;
  int data_blocks = 0;
  int ll_blocks = 128;
  // 16 KiB: the LL one-shot (used up to 64 KiB) needs 1 KiB per CTA; larger forced calls take rounds.
  size_t ll_slot_bytes = 16 << 10;
  // LL128 region: 24 MiB takes 12 MiB of a 2-rank all-reduce per round on 132 CTAs; measured
  // as fast as 48 MiB at 4 and 16 MiB and faster at 64 MiB (more rounds, but the slots stay
  // in L2; tests/gpu/TUNING.md row 13). 0: that for 2 ranks, 48 MiB for more (their slots are
  // split among world - 1 sources, and the LL128 two-shot halves each slot again).
  size_t ll128_bytes = 0;
  int ll128_blocks = 0;  // 0: 3 per SM (3 x data_blocks)
  int share_gpu = 0;     // 1: ranks may share a GPU (time-sliced; for tests on fewer GPUs)

  std::string encode() const {
    std::ostringstream os;
    os << tune.threads << ' ' << tune.ll_threads << ' ' << tune.min_tile << ' ' << tune.push_min_chunk << ' '
       << tune.ll_max << ' ' << tune.push_max << ' ' << workspace_bytes << ' ' << data_blocks << ' ' << ll_blocks
       << ' ' << ll_slot_bytes << ' ' << tune.pdl << ' ' << tune.pipe_tile << ' ' << tune.pipe_min << ' '
       << tune.ll128_max << ' ' << tune.ll128_min_groups
       << ' ' << ll128_bytes << ' ' << tune.ll128_threads << ' ' << ll128_blocks << ' '
       << tune.reg_pipe_min << ' ' << tune.ll128_busy_groups << ' ' << tune.ll128_twoshot_min << ' '
       << tune.ll128_twoshot_max << ' ' << tune.ll128_rsag_max << ' ' << share_gpu << ' ' << (algo.empty() ? "-" : algo);
    return os.str();
  }
  static Agreed decode(const std::string& s) {
    Agreed a;
    std::istringstream is(s);
    is >> a.tune.threads >> a.tune.ll_threads >> a.tune.min_tile >> a.tune.push_min_chunk >> a.tune.ll_max >>
        a.tune.push_max >> a.workspace_bytes >> a.data_blocks >> a.ll_blocks >> a.ll_slot_bytes >> a.tune.pdl >>
        a.tune.pipe_tile >> a.tune.pipe_min >> a.tune.ll128_max >>
        a.tune.ll128_min_groups >> a.ll128_bytes >> a.tune.ll128_threads >> a.ll128_blocks >>
        a.tune.reg_pipe_min >> a.tune.ll128_busy_groups >> a.tune.ll128_twoshot_min >> a.tune.ll128_twoshot_max >>
        a.tune.ll128_rsag_max >> a.share_gpu >> a.algo;
    if (a.algo == "-") a.algo.clear();
    return a;
  }
};

Agreed local_settings(const GroupContext& ctx, int sm_count) {
  Agreed a;
  // setting: ACTORCC_CUDA_THREADS - threads per CTA of the data kernels (default 512)
  a.tune.threads = static_cast<int>(std::min<size_t>(512, env_size("ACTORCC_CUDA_THREADS", 512)));
  // setting: ACTORCC_CUDA_MIN_TILE - smallest per-CTA tile in bytes (default 16384)
  a.tune.min_tile = env_size("ACTORCC_CUDA_MIN_TILE", a.tune.min_tile);
  // setting: ACTORCC_CUDA_PUSH_CHUNK - smallest per-CTA slice of the one-shot push (default 8192)
  a.tune.push_min_chunk = env_size("ACTORCC_CUDA_PUSH_CHUNK", a.tune.push_min_chunk);
  // setting: ACTORCC_CUDA_LL_MAX - all-reduce bytes (2 ranks) up to which the LL one-shot is used
  a.tune.ll_max = env_size("ACTORCC_CUDA_LL_MAX", a.tune.ll_max);
  // setting: ACTORCC_CUDA_PUSH_MAX - all-reduce bytes (2 ranks) up to which the one-shot push is used
  a.tune.push_max = env_size("ACTORCC_CUDA_PUSH_MAX", a.tune.push_max);
  // setting: ACTORCC_CUDA_BLOCKS - CTAs of the data kernels (default: the GPU's SM count)
  a.data_blocks = static_cast<int>(std::min<size_t>(cuda::kMaxBlocks, env_size("ACTORCC_CUDA_BLOCKS", sm_count)));
  // setting: ACTORCC_CUDA_LL_THREADS - threads per CTA of the LL one-shot (default 512)
  a.tune.ll_threads = static_cast<int>(std::min<size_t>(512, env_size("ACTORCC_CUDA_LL_THREADS", 512)));
  // setting: ACTORCC_CUDA_LL_BLOCKS - CTAs of the LL one-shot (default 128)
  a.ll_blocks = static_cast<int>(std::min<size_t>(cuda::kMaxBlocks, env_size("ACTORCC_CUDA_LL_BLOCKS", a.ll_blocks)));
  // setting: ACTORCC_CUDA_PDL - 0 disables programmatic dependent launch of the kernels
  if (auto v = env::get_bool("ACTORCC_CUDA_PDL")) a.tune.pdl = *v ? 1 : 0;
  // setting: ACTORCC_CUDA_PIPE_TILE - largest per-CTA tile in bytes of the pipelined two-shot
  a.tune.pipe_tile = env_size("ACTORCC_CUDA_PIPE_TILE", a.tune.pipe_tile);
  // setting: ACTORCC_CUDA_PIPE_MIN - all-reduce bytes (2 ranks) from which the pipelined two-shot is used
  a.tune.pipe_min = env_size("ACTORCC_CUDA_PIPE_MIN", a.tune.pipe_min);
  // setting: ACTORCC_CUDA_LL128_MAX - all-reduce bytes (2 ranks) up to which the LL128 one-shot is used
  a.tune.ll128_max = env_size("ACTORCC_CUDA_LL128_MAX", a.tune.ll128_max);
  // setting: ACTORCC_CUDA_LL128_MIN_GROUPS - fewest 4-line groups per CTA of the LL128 one-shot (default 4)
  a.tune.ll128_min_groups = env_size("ACTORCC_CUDA_LL128_MIN_GROUPS", a.tune.ll128_min_groups);
  // setting: ACTORCC_CUDA_LL128_BUSY_GROUPS - fewest groups per CTA of the LL128 one-shot while one CTA per SM remains (default 32; 0 off)
  a.tune.ll128_busy_groups = env_size("ACTORCC_CUDA_LL128_BUSY_GROUPS", a.tune.ll128_busy_groups);
  // setting: ACTORCC_CUDA_LL128_BYTES - size of the LL128 receive region per rank (default 24 MiB for 2 ranks, 48 MiB for more)
  a.ll128_bytes = env_size("ACTORCC_CUDA_LL128_BYTES", a.ll128_bytes);
  // setting: ACTORCC_CUDA_LL128_THREADS - threads per CTA of the LL128 one-shot (default 256)
  a.tune.ll128_threads = static_cast<int>(std::clamp<size_t>(env_size("ACTORCC_CUDA_LL128_THREADS", 256), 32, 512) / 32 * 32);
  // setting: ACTORCC_CUDA_LL128_TWOSHOT_MIN - all-reduce bytes (more than 2 ranks) from which the LL128 two-shot is used
  a.tune.ll128_twoshot_min = env_size("ACTORCC_CUDA_LL128_TWOSHOT_MIN", a.tune.ll128_twoshot_min);
  // setting: ACTORCC_CUDA_LL128_TWOSHOT_MAX - all-reduce bytes (more than 2 ranks) up to which the LL128 two-shot is used
  a.tune.ll128_twoshot_max = env_size("ACTORCC_CUDA_LL128_TWOSHOT_MAX", a.tune.ll128_twoshot_max);
  // setting: ACTORCC_CUDA_LL128_RSAG_MAX - reduce_scatter / all_gather bytes (full buffer) up to which LL128 lines are used (default all; 1: the push kernels)
  a.tune.ll128_rsag_max = env_size("ACTORCC_CUDA_LL128_RSAG_MAX", a.tune.ll128_rsag_max);
  // setting: ACTORCC_CUDA_REG_PIPE_MIN - all-reduce bytes (2 ranks) from which registered outputs take the pipelined two-shot
  a.tune.reg_pipe_min = env_size("ACTORCC_CUDA_REG_PIPE_MIN", a.tune.reg_pipe_min);
  // setting: ACTORCC_CUDA_LL128_BLOCKS - CTAs of the LL128 one-shot (default 3 x the data kernels' CTAs)
  a.ll128_blocks = static_cast<int>(std::min<size_t>(cuda::kMaxBlocks, env_size("ACTORCC_CUDA_LL128_BLOCKS", 0)));
  // setting: ACTORCC_CUDA_SHARE_GPU - 1 lets ranks share a GPU (refused otherwise): every wait on a
  // rank of the same GPU then lasts until the GPU switches processes, so only for tests that run
  // more ranks than there are GPUs
  if (auto v = env::get_bool("ACTORCC_CUDA_SHARE_GPU")) a.share_gpu = *v ? 1 : 0;
  // Default 136 MiB of push slots: with 132 CTAs and 2 ranks that is 128 KiB tiles, so a
  // 64 MiB all-reduce takes exactly two rounds.
  a.workspace_bytes = ctx.options.workspace_bytes ? ctx.options.workspace_bytes : (136u << 20);
  a.algo = ctx.options.algo;
  return a;
}

// Two ranks on one GPU each spin in kernels that the GPU time-slices between the processes (no
// concurrency without MPS): every wait for the other rank lasts until the GPU switches, so such a
// group is refused unless rank 0 allowed it (ACTORCC_CUDA_SHARE_GPU, for tests that run more
// ranks than there are GPUs). Every rank decides from the same peer table and rank 0's setting.
void refuse_shared_gpu(const GroupContext& ctx, bool allowed) {
  const auto [r, q] = topology::shared_gpu(ctx.peers);
  if (r < 0) return;
  const std::string& gpu = ctx.peers[r].gpu_uuid;
  if (!allowed)
    throw UnsupportedError("rank " + std::to_string(ctx.rank) + ": ranks " + std::to_string(r) + " and " +
                               std::to_string(q) + " share GPU " + gpu +
                               "; the CUDA backend needs one GPU per rank (ACTORCC_CUDA_SHARE_GPU=1 allows it for "
                               "tests, time-sliced and slow)",
                           ctx.rank);
  LOG_WARN("rank " << ctx.rank << ": ranks " << r << " and " << q << " share GPU " << gpu
                   << " (ACTORCC_CUDA_SHARE_GPU): calls wait for the GPU to switch processes");
}

class CudaBackend final : public BackendImpl {
 public:
  explicit CudaBackend(GroupContext& ctx) : ctx_(ctx), device_(ctx.options.device) {
    if (device_ < 0) ck(cudaGetDevice(&device_), "cudaGetDevice");
    if (ctx.world == 1) return;  // a one-rank group only copies; nothing to share
    if (ctx.num_nodes > 1)
      throw UnsupportedError("rank " + std::to_string(ctx.rank) +
                             ": the CUDA backend serves one node; this group spans " + std::to_string(ctx.num_nodes) +
                             " nodes (the inter-node NCCL rail transport is not built yet)");
    if (ctx.world > cuda::kMaxRanks)
      throw UnsupportedError("the CUDA backend supports up to " + std::to_string(cuda::kMaxRanks) + " ranks per node");
    Deadline dl = Deadline::after(ctx.options.join_timeout);

    // Local preparation; failures are shared so every rank throws together (same bootstrap calls).
    std::string err;
    Agreed mine;
    try {
      ck(cudaSetDevice(device_), "cudaSetDevice");
      const auto& drv = ipc::DriverApi::get();
      if (!drv.ok) throw CudaError("CUDA driver API unavailable: " + drv.error);
      int sms = 0;
      ck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_), "cudaDeviceGetAttribute");
      mine = local_settings(ctx, sms);
      words_ = std::make_shared<HostWords>();
      // [kMaxBlocks] step counters, then the abort-poll timestamp and the device abort copy.
      counters_ = std::make_unique<DeviceBuffer>((cuda::kMaxBlocks + 2) * sizeof(unsigned long long));
      cudaEvent_t ev = nullptr;
      ck(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
      order_event_.reset(ev);
    } catch (const std::exception& e) {
      err = Outcomes::reason(e);
    }
    const auto all = Outcomes::gather_result(*ctx.bootstrap, err, mine.encode(), dl);
    if (!all.all_ok())
      throw UnsupportedError("rank " + std::to_string(ctx.rank) + ": CUDA setup failed on " + all.reasons(), ctx.rank);
    int min_blocks = cuda::kMaxBlocks;
    for (int r = 0; r < ctx.world; ++r) min_blocks = std::min(min_blocks, Agreed::decode(all.text(r)).data_blocks);
    agreed_ = Agreed::decode(all.text(0));
    agreed_.data_blocks = std::max(1, min_blocks);
    bool known = true;
    forced_ = cuda::forced_route(agreed_.algo, known);
    if (!known)
      LOG_WARN("rank " << ctx.rank << ": algorithm '" << agreed_.algo
                       << "' is not a CUDA all-reduce algorithm; using the planner");
    refuse_shared_gpu(ctx, agreed_.share_gpu != 0);
    // Workspace layout (see kernels/device_comm.cuh).
    const int W = ctx.world, NB = agreed_.data_blocks;
    size_t tile = agreed_.workspace_bytes / (size_t(4) * NB * W);
    tile = tile / 4096 * 4096;
    if (tile < 4096) tile = 4096;
    DeviceComm& d = dc_;
    d.rank = ctx.rank;
    d.world = W;
    d.flags_off = 0;
    d.desc_off = cuda::flags_bytes();
    d.ll_off = d.desc_off + cuda::desc_bytes();
    d.ll_blocks = agreed_.ll_blocks;
    d.ll_slot_bytes = agreed_.ll_slot_bytes;
    d.ll128_off = d.ll_off + size_t(2) * d.ll_blocks * W * d.ll_slot_bytes;
    d.ll128_blocks = agreed_.ll128_blocks > 0 ? agreed_.ll128_blocks : std::min(cuda::kMaxBlocks, 3 * NB);
    // At least 2 groups of 512 bytes per slot: the LL128 two-shot uses one half for each phase.
    const size_t ll128_bytes = agreed_.ll128_bytes ? agreed_.ll128_bytes : size_t(24 << 20) * std::min(W - 1, 2);
    d.ll128_slot_bytes = std::max<size_t>(1024, ll128_bytes / (size_t(2) * d.ll128_blocks * (W - 1)) / 512 * 512);
    d.data_off = d.ll128_off + size_t(2) * d.ll128_blocks * (W - 1) * d.ll128_slot_bytes;
    d.data_blocks = NB;
    d.tile_bytes = tile;
    const size_t total = d.data_off + size_t(4) * NB * W * tile;

    ws_ = ipc::SharedWorkspace::create(ctx, device_, total);
    for (int r = 0; r < cuda::kMaxRanks; ++r) d.ws[r] = r < W ? static_cast<char*>(ws_->peer(r)) : nullptr;
    d.counters = static_cast<unsigned long long*>(counters_->p);
    d.abort_word = words_->dev;
    d.error = words_->dev + 4;
    d.timeout_ns = static_cast<unsigned long long>(ctx.options.timeout.count()) * 1000000ull;
    d.abort_poll = d.counters + cuda::kMaxBlocks;
    // setting: ACTORCC_CUDA_ABORT_POLL_US - how often (us) one waiting thread per GPU reads the
    // host abort word (default 20; 0 = every waiting thread at every check, for measurements)
    {
      auto v = env::get_int("ACTORCC_CUDA_ABORT_POLL_US");
      d.abort_poll_ns = static_cast<unsigned long long>(v && *v >= 0 ? *v : 20) * 1000ull;
    }

    std::weak_ptr<HostWords> w = words_;
    ctx.abort->on_raise([w] {
      if (auto p = w.lock()) *p->abort_word() = 1;
    });
    LOG_INFO("rank " << ctx.rank << ": CUDA backend on device " << device_ << ", workspace " << (total >> 20)
                     << " MiB shared by " << ws_->mode() << ", " << NB << " CTAs, tile " << tile << " B");
  }

  ~CudaBackend() override {
    int prev = -1;
    if (cudaGetDevice(&prev) == cudaSuccess && prev != device_) cudaSetDevice(device_);
    // Kernels still queued may use the workspace: let them finish (or fail) before unmapping.
    if (ws_) cudaDeviceSynchronize();
    if (prev >= 0 && prev != device_) cudaSetDevice(prev);
    cudaGetLastError();
  }

  Backend kind() const override { return Backend::Cuda; }
  int device() const override { return device_; }

  cuda::Route pick(Collective c, size_t bytes, bool registered_output) const {
    return cuda::pick_route(c, bytes, registered_output, ctx_.world, agreed_.tune, forced_);
  }

  std::string plan(Collective c, size_t bytes, bool registered_output) const override {
    return cuda::route_name(pick(c, bytes, registered_output), c);
  }

  void run(const CollArgs& a) override {
    check_device_errors();
    if (a.coll > Collective::Barrier) return run_more(a);
    if (a.coll != Collective::Barrier && a.count == 0) return;
    DeviceGuard guard(device_);
    if (a.coll != Collective::Barrier) {
      if (a.send) check_buffer(a.send, "send", a);
      check_buffer(a.recv, "recv", a);
    }
    auto stream = static_cast<cudaStream_t>(a.stream);
    if (ctx_.world == 1) return run_single(a, stream);
    order_after_previous(stream);
    CallArgs ca = call_args(a, stream);
    cudaError_t e = cudaSuccess;
    switch (a.coll) {
      case Collective::AllReduce: {
        const size_t bytes = a.count * dtype_size(a.dtype);
        const auto* reg = registered_.find(a.recv, bytes);
        const cuda::Route algo = pick(a.coll, bytes, reg != nullptr);
        describe_call(ca, reg, bytes);
        if (algo == cuda::Route::OneShot) e = cuda::allreduce_ll(dc_, agreed_.tune, ca);
        else if (algo == cuda::Route::Push) e = cuda::allreduce_push(dc_, agreed_.tune, ca);
        else if (algo == cuda::Route::Pipe) e = cuda::allreduce_twoshot_pipe(dc_, agreed_.tune, ca);
        else if (algo == cuda::Route::LL128) e = cuda::allreduce_ll128(dc_, agreed_.tune, ca);
        else if (algo == cuda::Route::LL128TwoShot) e = cuda::allreduce_ll128_twoshot(dc_, agreed_.tune, ca);
        else e = cuda::allreduce_twoshot(dc_, agreed_.tune, ca);
        break;
      }
      // `bytes` of plan(): the full buffer, world x count elements.
      case Collective::ReduceScatter:
      case Collective::AllGather: {
        const bool lines = pick(a.coll, a.count * ctx_.world * dtype_size(a.dtype), false) == cuda::Route::LL128Lines;
        const bool rs = a.coll == Collective::ReduceScatter;
        e = lines ? (rs ? cuda::reduce_scatter_ll128 : cuda::allgather_ll128)(dc_, agreed_.tune, ca)
                  : (rs ? cuda::reduce_scatter_push : cuda::allgather_push)(dc_, agreed_.tune, ca);
        break;
      }
      case Collective::Broadcast: e = cuda::broadcast_push(dc_, agreed_.tune, ca); break;
      case Collective::Barrier: e = cuda::barrier_flags(dc_, agreed_.tune, ca); break;
    }
    ck(e, std::string("launching CUDA ") + std::string(to_string(a.coll)));
    last_stream_ = stream;
    have_last_ = true;
  }

  // The calls added with point-to-point. all_to_all, gather, scatter and reduce run as push
  // kernels over the workspace (cuda_exchange.cu, cuda_oneshot_push.cu); buffers a call does
  // not use on this rank (gather's output, scatter's input off the root) may be null.
  // Send, recv, batches and all_to_all_v need per-pair progress, which the workspace's
  // group-wide step counters do not give: on this path they are refused (the NCCL path and
  // the CPU backend carry them).
  void run_more(const CollArgs& a) {
    const bool pushes = a.coll == Collective::AllToAll || a.coll == Collective::Gather ||
                        a.coll == Collective::Scatter || a.coll == Collective::Reduce;
    if (!pushes)
      throw UnsupportedError("rank " + std::to_string(ctx_.rank) + ": " + std::string(to_string(a.coll)) +
                                 " is not available on the CUDA backend's NVLink path yet (the CPU backend and "
                                 "groups that NCCL carries have it)",
                             ctx_.rank);
    if (a.count == 0) return;
    DeviceGuard guard(device_);
    if (a.send) check_buffer(a.send, "send", a);
    if (a.recv) check_buffer(a.recv, "recv", a);
    auto stream = static_cast<cudaStream_t>(a.stream);
    if (ctx_.world == 1) return run_single(a, stream);  // each is a copy within one rank
    order_after_previous(stream);
    cuda::CallArgs ca = call_args(a, stream);
    const cudaError_t e = a.coll == Collective::Reduce ? cuda::reduce_push(dc_, agreed_.tune, ca)
                                                        : cuda::exchange_push(dc_, agreed_.tune, ca);
    ck(e, std::string("launching CUDA ") + std::string(to_string(a.coll)));
    last_stream_ = stream;
    have_last_ = true;
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
    ck(cudaDeviceSynchronize(), "cudaDeviceSynchronize (deregister_buffer)");
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
    std::string where = "rank " + std::to_string(ctx_.rank) + ": " + std::string(to_string(a.coll)) + ": " + which +
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

  // A kernel that gave up (timeout, abort) left a record in host-mapped memory: turn it into
  // the group's error, once, and throw it.
  void check_device_errors() {
    if (!words_) return;
    volatile int* e = words_->error();
    int code = e[0];
    if (code == cuda::kErrNone) return;
    int peer = e[1], coll = e[2];
    std::string what =
        coll >= 0 && coll < kNumCollectives ? std::string(to_string(static_cast<Collective>(coll))) : "collective";
    std::string ms = std::to_string(ctx_.options.timeout.count());
    if (code == cuda::kErrTimeout)
      ctx_.abort->raise(peer, ErrorCode::Timeout,
                        "CUDA " + what + " timed out after " + ms + " ms waiting for rank " + std::to_string(peer));
    else if (code == cuda::kErrMismatch)
      ctx_.abort->raise(peer, ErrorCode::InvalidArgument,
                        "CUDA " + what + ": rank " + std::to_string(peer) +
                            " called it with a different count, type or op, or with an output that is not the "
                            "same registered buffer at the same offset (and alignment) as rank " +
                            std::to_string(ctx_.rank) + "'s; nothing was written into another rank's output");
    else
      ctx_.abort->raise(peer, ErrorCode::Remote, "CUDA " + what + " stopped: the group was aborted");
    ctx_.abort->rethrow();
  }

  // Calls must run in order on the device (they share workspace slots and step counters).
  // When the caller switches streams, the new stream waits for the previous one (not while
  // capturing a graph: a capture may not wait on work outside it).
  void order_after_previous(cudaStream_t s) {
    if (!have_last_ || s == last_stream_) return;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    cudaStreamCaptureStatus ls = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(last_stream_, &ls) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    if (cs != cudaStreamCaptureStatusNone || ls != cudaStreamCaptureStatusNone) return;
    ck(cudaEventRecord(order_event_.get(), last_stream_), "cudaEventRecord");
    ck(cudaStreamWaitEvent(s, order_event_.get(), 0), "cudaStreamWaitEvent");
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

  static cuda::CallArgs call_args(const CollArgs& a, cudaStream_t stream) {
    cuda::CallArgs ca;
    ca.send = a.send;
    ca.recv = a.recv;
    ca.count = a.count;
    ca.dtype = static_cast<int>(a.dtype);
    ca.op = static_cast<int>(a.op);
    ca.root = a.root;
    ca.coll = static_cast<int>(a.coll);
    ca.stream = stream;
    return ca;
  }

  void run_single(const CollArgs& a, cudaStream_t s) {
    if (a.coll == Collective::Barrier) return;
    size_t bytes = a.count * dtype_size(a.dtype);  // every collective of one rank is a copy
    if (a.send && a.recv && a.send != a.recv) ck(cudaMemcpyAsync(a.recv, a.send, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  }

  GroupContext& ctx_;
  int device_ = -1;
  Agreed agreed_;
  cuda::Route forced_ = cuda::Route::Other;
  DeviceComm dc_{};
  std::shared_ptr<HostWords> words_;
  std::unique_ptr<DeviceBuffer> counters_;
  std::unique_ptr<ipc::SharedWorkspace> ws_;
  ipc::RegisteredBuffers registered_;
  // Owned here, so a constructor that throws after creating it does not leak it.
  struct EventDestroy {
    void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
  };
  std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDestroy> order_event_;
  cudaStream_t last_stream_ = nullptr;
  bool have_last_ = false;
  std::array<const void*, 8> checked_{};
  size_t next_checked_ = 0;
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
