// LL128 reduce-scatter and all-gather (kernels/ll128_lines.cuh), as one kernel: the two-shot
// all-reduce ("twoshot_ll128", more than 2 ranks), and reduce_scatter and all_gather on their own.
// The one-shots move world - 1 copies of an all-reduce out of every rank; the two-shot moves
// 2 (world - 1) / world of it (4 ranks: 1.5 copies instead of 3), with no fence and no flag round
// trip per tile as in the pipelined two-shot, whose per-tile synchronisation made it the slowest
// part of the 4-rank table at 1-4 MiB (bench/results/2026-11-30-h200x4-r). The push
// reduce_scatter and all_gather fence every tile the same way (~4.2-5.5 us in graphs up to 64 KB
// on 2 x H200, NCCL symmetric 3.4-4.4: bench/results/2026-11-30-h200x2-u).
//
// The full buffer (the all-reduce's input and output, reduce_scatter's input, all_gather's
// output) is `world` chunks of `stride` bytes (the last ones may be shorter or empty for the
// all-reduce); chunk q is rank q's to reduce. Each chunk is cut into groups of D bytes, and CTA b
// takes the same chunk-local groups of every chunk. Each warp, for its groups in turn (i = 0, ...):
//   A(i)   reduce-scatter: push group i of every peer's chunk into that peer's RS slot for us;
//          our own chunk's group i stays in registers (all_gather: only that load);
//   B(i-1) fold group i-1 of our chunk with every peer's (reduce-scatter; all_gather: just ours),
//          store it into our output, and (all-gather) push it into every peer's AG slot for us;
//   C(i-2) all-gather: receive group i-2 of every peer's chunk into our output.
// So each warp has one group of each stage in flight; C runs two groups behind A because a
// peer's fold of group i-1 needs our push of it, which only went out in this iteration.
//
// Slots: each (parity, CTA, source) LL128 slot is cut in two halves, RS lines in the first,
// AG lines in the second, so the address -> CTA mapping (and so every stale line's flag, which is
// an earlier step of the same CTA) is the one-shot's. Reuse as in the one-shot: rank A's CTA b
// writes a parity's slots again at step s+2 only after it has received every peer's lines of
// step s+1 (RS or AG), which each peer pushed after its barrier ending step s (all of step s read).
// Each element is folded once, by its chunk's owner, in rank order: the same bits on every rank.
// In place (NCCL's: the rank's chunk of the full buffer) is safe: a warp stores an output group
// only after it read the same group's input (the fold uses registers; C(i-2) writes what A(i-2)
// of the same warp read, and all_gather's own chunk is stored where it was read).
#include "algorithms/cuda/launch.hpp"
#include "algorithms/cuda/ll128_grid.hpp"
#include "kernels/primitives.cuh"
#include "kernels/reduce_ops.cuh"

namespace actorcc::cuda {
namespace {

// Peers whose input parts a warp loads before pushing them: all of them for 4 ranks; more
// registers for all of 8 ranks would cost the third CTA per SM.
constexpr int kLoadBatch = 3;
// At most 256 threads, 3 CTAs per SM (the LL128 region's ll128_blocks): 80 registers, no spills
// but int8 average's. The receives poll one peer after another: loading 4 ranks' lines before
// waiting for any took ~110 registers (2 CTAs per SM) and measured no faster on 4 ranks
// (docs/perf/tuning.md), so the time is not in the polls' latencies.
constexpr unsigned kMaxThreads = 256;

// Where a call's chunks are: the full buffer's chunk q starts at q * stride; `in` / `out` point
// at the full buffer, or (reduce_scatter's output, all_gather's input) at this rank's chunk.
struct Ll128Chunks {
  size_t groups;  // groups per chunk
  size_t stride;  // bytes from one chunk to the next in the full buffer
  size_t total;   // bytes of the full buffer (chunk q holds min(stride, total - q * stride))
  __device__ size_t bytes(int q) const { return total > q * stride ? min(stride, total - q * stride) : 0; }
};

template <typename T, typename Op, bool kReduceScatter, bool kAllGather>
__global__ void __launch_bounds__(kMaxThreads, 3) ll128_twoshot(DeviceComm c, const char* in, char* out, Ll128Chunks ch,
                                                              size_t groups_per_block, size_t round_groups, int coll) {
  constexpr size_t D = Ll128Lane<T>::D;
  const Ll128Lane<T> ln;
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const unsigned warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  auto in_chunk = [&](int q) { return kReduceScatter ? in + q * ch.stride : in; };
  auto out_chunk = [&](int q) { return kAllGather ? out + q * ch.stride : out; };
  const size_t ag_half = c.ll128_slot_bytes / (2 * kGroupSlot) * kGroupSlot;
  const size_t g0 = b * groups_per_block, g1 = min(ch.groups, g0 + groups_per_block);
  const size_t lane16 = size_t(ln.lane) * 16;
  constexpr size_t kStages = kAllGather ? 2 : 1;  // groups the last stage runs behind the first
  Step st = begin_steps(c);
  bool failed = false;
  for (size_t base = g0; base < g1 && !failed; base += round_groups) {
    const auto [flag, par, mine] = ll128_round(c, st, min(round_groups, g1 - base));
    uint4 own{}, own_prev{};  // this lane's part of our chunk's groups i and i - 1
    for (size_t i = 0; i < mine + kStages && !failed; ++i) {
      if (i < mine) {  // A(i): loads in batches of 3 peers (one latency per batch), then the pushes
        const size_t r = warp + i * nwarps, at = (base + r) * D + ln.off;
        own = load_part(in_chunk(me), at, ln.part, ch.bytes(me), aligned16(in_chunk(me)));
        if constexpr (kReduceScatter)
          for (int k0 = 1; k0 < W; k0 += kLoadBatch) {
            uint4 v[kLoadBatch];
#pragma unroll
            for (int j = 0; j < kLoadBatch; ++j)
              if (k0 + j < W) {
                const int q = peer_after(c, k0 + j);
                v[j] = load_part(in_chunk(q), at, ln.part, ch.bytes(q), aligned16(in_chunk(q)));
              }
#pragma unroll
            for (int j = 0; j < kLoadBatch; ++j)
              if (k0 + j < W)
                ll128_push(ll128_slot(c, peer_after(c, k0 + j), par, b, me) + r * kGroupSlot + lane16, v[j],
                           ln.flag_lane, flag);
          }
      }
      if (i >= 1 && i <= mine) {  // B(i-1): our chunk's group, folded, to our output and the peers
        const size_t r = warp + (i - 1) * nwarps;
        uint4 sum = own_prev;
        if constexpr (kReduceScatter)
          sum = reduce_word<T, Op, uint4>(W, [&](int k) -> uint4 {
            if (k == me) return own_prev;
            return ll128_poll(c, st, ll128_slot(c, me, par, b, k) + r * kGroupSlot + lane16, ln.flag_lane, flag, k,
                              coll, failed);
          });
        if (!failed) {
          store_part(out_chunk(me), (base + r) * D + ln.off, ln.part, ch.bytes(me), aligned16(out_chunk(me)), sum);
          if constexpr (kAllGather)
            for (int k = 1; k < W; ++k)
              ll128_push(ll128_slot(c, peer_after(c, k), par, b, me) + ag_half + r * kGroupSlot + lane16, sum,
                         ln.flag_lane, flag);
        }
      }
      if (kAllGather && i >= 2) {  // C(i-2): every peer's folded group into our output
        const size_t r = warp + (i - 2) * nwarps;
        for (int k = 1; k < W && !failed; ++k) {
          const int q = peer_after(c, k);
          const uint4 v = ll128_poll(c, st, ll128_slot(c, me, par, b, q) + ag_half + r * kGroupSlot + lane16,
                                     ln.flag_lane, flag, q, coll, failed);
          if (!failed)
            store_part(out_chunk(q), (base + r) * D + ln.off, ln.part, ch.bytes(q), aligned16(out_chunk(q)), v);
        }
      }
      own_prev = own;
    }
    ++st.s;
    __syncthreads();  // the slots of this parity are free again only after every warp read them
  }
  end_steps(c, st);
}

// Launches the two-shot kernel half (or both) for the call's dtype and op; all_gather has no
// arithmetic, so one instantiation moves 4-byte words for every dtype.
template <bool kReduceScatter, bool kAllGather>
cudaError_t launch_twoshot(const DeviceComm& c, const Tuning& t, const CallArgs& a, const Ll128Chunks& ch) {
  // Each slot holds a round's RS lines in one half and its AG lines in the other.
  const Ll128Grid g = plan_ll128(ch.groups, c.ll128_slot_bytes / (2 * kGroupSlot), c, t);
  cudaError_t e = cudaSuccess;
  auto launch = [&]<typename T, typename Op>() {
    e = launch_kernel(ll128_twoshot<T, Op, kReduceScatter, kAllGather>, static_cast<unsigned>(g.blocks),
                      std::min(g.threads, kMaxThreads), t, a.stream, c, static_cast<const char*>(a.send),
                      static_cast<char*>(a.recv), ch, g.groups_per_block, g.round_groups, a.coll);
  };
  if constexpr (kReduceScatter)
    with_dtype_op(a.dtype, a.op, launch);
  else
    launch.template operator()<unsigned, SumOp<unsigned>>();
  return e;
}

}  // namespace

// Buffers (and reduce_scatter / all_gather chunks) the lines cannot carry never get here: the
// planner's ll128_buffers and ll128_chunks conditions.
cudaError_t twoshot_ll128(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  const size_t esz = dtype_bytes(a.dtype);
  const size_t bytes = a.count * esz;
  const size_t groups = ceil_div(ceil_div(bytes, ll128_group_data(esz)), size_t(c.world));
  return launch_twoshot<true, true>(c, t, a, {groups, groups * ll128_group_data(esz), bytes});
}

cudaError_t reduce_scatter_ll128(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  const size_t chunk = a.count * dtype_bytes(a.dtype);
  const size_t groups = ceil_div(chunk, ll128_group_data(dtype_bytes(a.dtype)));
  return launch_twoshot<true, false>(c, t, a, {groups, chunk, chunk * c.world});
}

cudaError_t allgather_ll128(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  const size_t chunk = a.count * dtype_bytes(a.dtype);
  return launch_twoshot<false, true>(c, t, a, {ceil_div(chunk, ll128_group_data(4)), chunk, chunk * c.world});
}

}  // namespace actorcc::cuda
