// Two-shot all-reduce, LL128 protocol ("twoshot_ll128"), for medium messages on more than 2
// ranks. The one-shots move world - 1 copies of the message out of every rank; this moves
// 2 (world - 1) / world of it (4 ranks: 1.5 copies instead of 3), in LL128 lines
// (kernels/ll128_lines.cuh), so there is no fence and no flag round trip per tile as in the
// pipelined two-shot, whose per-tile synchronisation made it the slowest part of the 4-rank
// table at 1-4 MiB (bench/results/2026-11-30-h200x4-r).
//
// The message is cut into `world` chunks of chunk_groups groups (chunk j: groups
// [j*chunk_groups, (j+1)*chunk_groups)); CTA b takes the same chunk-local groups of every chunk.
// Each warp, for its chunk-local groups in turn (i = 0, 1, ...):
//   A(i)  reduce-scatter push: group i of every peer's chunk into that peer's RS slot for us;
//         our own chunk's group i stays in registers;
//   B(i-1) receive group i-1 of our chunk from every peer, fold in rank order with our own,
//         store it into our output and push it into every peer's AG slot for us;
//   C(i-2) receive group i-2 of every peer's chunk (the peers' folds) into our output.
// So each warp has one group of each stage in flight; C runs two groups behind A because a
// peer's fold of group i-1 needs our push of it, which only went out in this iteration.
//
// Slots: each (parity, CTA, source) LL128 slot is cut in two halves, RS lines in the first,
// AG lines in the second, so the address -> CTA mapping (and so every stale line's flag, which is
// an earlier step of the same CTA) is the one-shot's. Reuse as in the one-shot: rank A's CTA b
// writes a parity's slots again at step s+2 only after it has received every peer's AG lines of
// step s+1, which each peer pushed after its barrier ending step s (all of step s read).
// Each element is folded once, by its chunk's owner, in rank order: the same bits on every rank.
// In place is safe: a warp stores an output group only after it read the same group's input
// (the fold uses registers; C(i-2) writes what A(i-2) of the same warp read).
#include "algorithms/cuda_algorithms.hpp"
#include "kernels/ll128_lines.cuh"
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
// (TUNING.md row 33), so the time is not in the polls' latencies.
constexpr unsigned kMaxThreads = 256;

template <typename T, typename Op>
__global__ void __launch_bounds__(kMaxThreads, 3) ll128_twoshot(DeviceComm c, const char* in, char* out, size_t bytes,
                                                     size_t chunk_groups, size_t groups_per_block, size_t round_groups,
                                                     int coll) {
  constexpr size_t D = Ll128Lane<T>::D;
  const Ll128Lane<T> ln;
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const unsigned warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const bool vec = aligned16(in) && aligned16(out);
  const size_t chunk = chunk_groups * D;  // bytes per chunk (the last may reach past `bytes`)
  const size_t ag_half = c.ll128_slot_bytes / (2 * kGroupSlot) * kGroupSlot;
  const size_t g0 = b * groups_per_block, g1 = min(chunk_groups, g0 + groups_per_block);
  const size_t lane16 = size_t(ln.lane) * 16;
  Step st = begin_steps(c);
  bool failed = false;
  for (size_t base = g0; base < g1 && !failed; base += round_groups) {
    const size_t ng = min(round_groups, g1 - base);
    const unsigned flag = static_cast<unsigned>(st.s + 1);
    const int par = static_cast<int>(st.s & 1);
    const size_t mine = ng > warp ? (ng - warp + nwarps - 1) / nwarps : 0;  // this warp's groups
    uint4 own{}, own_prev{};  // this lane's part of our chunk's groups i and i - 1
    for (size_t i = 0; i < mine + 2 && !failed; ++i) {
      if (i < mine) {  // A(i): loads in batches of 3 peers (one latency per batch), then the pushes
        const size_t r = warp + i * nwarps, at = (base + r) * D + ln.off;
        own = load_part(in, me * chunk + at, ln.part, bytes, vec);
        for (int k0 = 1; k0 < W; k0 += kLoadBatch) {
          uint4 v[kLoadBatch];
#pragma unroll
          for (int j = 0; j < kLoadBatch; ++j)
            if (k0 + j < W) v[j] = load_part(in, peer_after(c, k0 + j) * chunk + at, ln.part, bytes, vec);
#pragma unroll
          for (int j = 0; j < kLoadBatch; ++j)
            if (k0 + j < W)
              ll128_push(ll128_slot(c, peer_after(c, k0 + j), par, b, me) + r * kGroupSlot + lane16, v[j],
                         ln.flag_lane, flag);
        }
      }
      if (i >= 1 && i <= mine) {  // B(i-1): fold our chunk, keep it, send it to every peer
        const size_t r = warp + (i - 1) * nwarps;
        const uint4 sum = reduce_word<T, Op, uint4>(W, [&](int k) -> uint4 {
          if (k == me) return own_prev;
          return ll128_poll(c, st, ll128_slot(c, me, par, b, k) + r * kGroupSlot + lane16, ln.flag_lane, flag, k, coll,
                            failed);
        });
        if (!failed) {
          store_part(out, me * chunk + (base + r) * D + ln.off, ln.part, bytes, vec, sum);
          for (int k = 1; k < W; ++k)
            ll128_push(ll128_slot(c, peer_after(c, k), par, b, me) + ag_half + r * kGroupSlot + lane16, sum,
                       ln.flag_lane, flag);
        }
      }
      if (i >= 2) {  // C(i-2): every peer's folded group into our output
        const size_t r = warp + (i - 2) * nwarps;
        for (int k = 1; k < W && !failed; ++k) {
          const int q = peer_after(c, k);
          const uint4 v = ll128_poll(c, st, ll128_slot(c, me, par, b, q) + ag_half + r * kGroupSlot + lane16,
                                     ln.flag_lane, flag, q, coll, failed);
          if (!failed) store_part(out, q * chunk + (base + r) * D + ln.off, ln.part, bytes, vec, v);
        }
      }
      own_prev = own;
    }
    ++st.s;
    __syncthreads();  // the slots of this parity are free again only after every warp read them
  }
  end_steps(c, st);
}

}  // namespace

cudaError_t allreduce_ll128_twoshot(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  // Buffers the lanes cannot take (planned or forced): the pipelined two-shot.
  if (!ll128_supports(a.dtype, a.send, a.recv)) return allreduce_twoshot_pipe(c, t, a);
  const size_t esz = dtype_bytes(a.dtype);
  const size_t bytes = a.count * esz;
  const size_t chunk_groups = ceil_div(ceil_div(bytes, ll128_group_data(esz)), size_t(c.world));
  // Each slot holds a round's RS lines in one half and its AG lines in the other.
  const Ll128Grid g = plan_ll128(chunk_groups, c.ll128_slot_bytes / (2 * kGroupSlot), c, t);
  cudaError_t e = cudaSuccess;
  with_dtype_op(a.dtype, a.op, [&]<typename T, typename Op>() {
    e = launch_kernel(ll128_twoshot<T, Op>, static_cast<unsigned>(g.blocks), std::min(g.threads, kMaxThreads), t, a.stream, c,
                      static_cast<const char*>(a.send), static_cast<char*>(a.recv), bytes, chunk_groups,
                      g.groups_per_block, g.round_groups, a.coll);
  });
  return e;
}

}  // namespace actorcc::cuda
