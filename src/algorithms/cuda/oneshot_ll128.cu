// One-shot all-reduce, LL128 protocol (medium and large messages). Every rank pushes its
// whole input into every peer, and the receiver polls the data itself, as in the LL one-shot,
// but the flag is one 32-bit word per 128-byte line: a warp stores 4 lines (512 bytes) per
// access, and the last lane of each 8-lane line carries the step flag in its last word. The
// wire carries 128/124 of the message (+3%; LL: 2x) and there is still no fence. The line
// layout, polling and grid are in kernels/ll128_lines.cuh (shared with the LL128 two-shot).
//
// The fold runs while the link is busy: each warp pushes its group i, then receives and folds
// its group i - 1, taking its own part of group i - 1 from the registers it pushed it from.
// Folding only after every push left the link idle during the local fold; a fold further
// behind, prefetching, batches, more CTAs per SM and split pushing/receiving warps measured no
// better (and split warps cannot work in place: a receiving warp may overwrite input that a
// pushing warp has not read yet). Three CTAs of 256 threads per SM (DeviceComm::ll128_blocks)
// beat one of 512. The CTA barrier between rounds stays although each warp's own chain would
// order the slots' reuse: CTAs in lock step at round ends measured faster. The measurements:
// docs/perf/tuning.md.
//
// Slots: a region only LL128 lines enter (kernels/device_comm.cuh). A line left by a raw-data
// protocol could hold the current step's number in its flag word by chance (measured with an
// earlier LL128 attempt in the shared data slots), and LL checks words that are raw data here.
// Larger slices than a slot take several rounds (a step each, alternating parity, a CTA barrier
// between them), as in the LL one-shot. Own input is read from the user buffer, and every rank
// folds in rank order: the same bits everywhere.
#include "algorithms/cuda/launch.hpp"
#include "algorithms/cuda/ll128_grid.hpp"
#include "kernels/primitives.cuh"
#include "kernels/reduce_ops.cuh"

namespace actorcc::cuda {
namespace {

template <typename T, typename Op>
__global__ void __launch_bounds__(512) ll128_allreduce(DeviceComm c, const char* in, char* out, size_t bytes,
                                                       size_t groups_per_block, size_t round_groups, int coll) {
  constexpr size_t D = Ll128Lane<T>::D;
  const Ll128Lane<T> ln;
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const unsigned warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const bool vec = aligned16(in) && aligned16(out);
  const size_t groups = (bytes + D - 1) / D;
  const size_t g0 = b * groups_per_block, g1 = min(groups, g0 + groups_per_block);
  // The warp's first input load goes out before the step counter read, so the two latencies
  // overlap at the start (measured faster: docs/perf/tuning.md).
  pdl_wait();
  // This lane's part of the warp's groups i - 1 and i.
  uint4 own{}, pushed = g0 + warp < g1 ? load_part(in, (g0 + warp) * D + ln.off, ln.part, bytes, vec) : uint4{};
  Step st = read_steps(c);
  bool failed = false;
  for (size_t base = g0; base < g1 && !failed; base += round_groups) {
    const auto [flag, par, mine] = ll128_round(c, st, min(round_groups, g1 - base));
    for (size_t i = 0; i <= mine && !failed; ++i) {
      if (i < mine) {  // push group i of this warp into every peer's slot for this rank
        const size_t r = warp + i * nwarps;
        if (base != g0 || i != 0) pushed = load_part(in, (base + r) * D + ln.off, ln.part, bytes, vec);
        for (int k = 1; k < W; ++k) {
          const int q = peer_after(c, k);
          ll128_push(ll128_slot(c, q, par, b, me) + r * kGroupSlot + ln.lane * 16, pushed, ln.flag_lane, flag);
        }
      }
      if (i > 0) {  // receive group i - 1 from every source, fold in rank order
        const size_t r = warp + (i - 1) * nwarps;
        const uint4 sum = reduce_word<T, Op, uint4>(W, [&](int k) -> uint4 {
          if (k == me) return own;
          return ll128_poll(c, st, ll128_slot(c, me, par, b, k) + r * kGroupSlot + ln.lane * 16, ln.flag_lane, flag, k,
                            coll, failed);
        });
        if (!failed) store_part(out, (base + r) * D + ln.off, ln.part, bytes, vec, sum);
      }
      own = pushed;
    }
    ++st.s;
    __syncthreads();  // the slots of this parity are free again only after every warp read them
  }
  end_steps(c, st);
}

}  // namespace

// Buffers the lines cannot carry never get here: the planner's ll128_buffers condition.
cudaError_t oneshot_ll128(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  const size_t esz = dtype_bytes(a.dtype);
  const size_t bytes = a.count * esz;
  const Ll128Grid g = plan_ll128(ceil_div(bytes, ll128_group_data(esz)), c.ll128_slot_bytes / kGroupSlot, c, t);
  cudaError_t e = cudaSuccess;
  with_dtype_op(a.dtype, a.op, [&]<typename T, typename Op>() {
    e = launch_kernel(ll128_allreduce<T, Op>, static_cast<unsigned>(g.blocks), g.threads, t, a.stream, c,
                      static_cast<const char*>(a.send), static_cast<char*>(a.recv), bytes, g.groups_per_block,
                      g.round_groups, a.coll);
  });
  return e;
}

}  // namespace actorcc::cuda
