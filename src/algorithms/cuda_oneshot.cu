// One-shot all-reduce, LL protocol (small messages). Every rank pushes its whole input into
// every peer's LL slot for this rank: each 16-byte store carries 8 data bytes and two copies
// of the step flag, so the receiver needs no separate flag and no fence — it polls its own
// memory until a line's flags say "this step", and one NVLink write latency is the whole
// synchronisation cost. Each rank then folds all inputs in rank order (own input read from
// the user buffer), so every rank produces the same bits. CTA b handles a fixed slice of the
// message and only exchanges with CTA b of the other ranks.
#include "algorithms/cuda_algorithms.hpp"
#include "kernels/ll_lines.cuh"

namespace actorcc::cuda {
namespace {

template <typename T, typename Op>
__global__ void __launch_bounds__(512) ll_allreduce(DeviceComm c, const char* in, char* out, size_t bytes,
                                                    size_t units_per_block, int coll) {
  Step st = begin_steps(c);
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const size_t units = (bytes + 7) / 8;
  const size_t cap = c.ll_slot_bytes / 16;
  const size_t u0 = b * units_per_block, u1 = min(units, u0 + units_per_block);
  const bool al8 = ((reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) & 7u) == 0;
  bool failed = false;
  for (size_t base = u0; base < u1; base += cap) {
    const unsigned flag = static_cast<unsigned>(st.s + 1);
    const int par = static_cast<int>(st.s & 1);
    // This rank's units go into slot[me] of every peer (peers in rotated order); the peers'
    // arrive in slot[k] of ours.
    ll_round<T, Op>(
        c, st, in, out, bytes, al8, base, min(cap, u1 - base), flag, coll, failed,
        [&](size_t j, uint4 line) {
          for (int k = 1; k < W; ++k) st_volatile_v4(ll_slot(c, peer_after(c, k), par, b, me) + j * 16, line);
        },
        [&](int k, size_t j) -> const char* { return ll_slot(c, me, par, b, k) + j * 16; });
    ++st.s;
    __syncthreads();
  }
  end_steps(c, st);
}

}  // namespace

size_t dtype_bytes(int dtype) {
  static const size_t sz[8] = {4, 2, 2, 8, 1, 1, 4, 8};
  return dtype >= 0 && dtype < 8 ? sz[dtype] : 0;
}

cudaError_t allreduce_ll(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  const size_t bytes = a.count * dtype_bytes(a.dtype);
  const size_t units = ceil_div(bytes, 8);
  const size_t cap = c.ll_slot_bytes / 16;  // units per CTA per round
  // About one 16-byte line per thread per peer: the latency of a line is the whole cost, so
  // spread the lines over as many CTAs as the LL slots allow; small messages use CTAs of 128
  // threads (more, smaller CTAs measured ~0.2-0.3 us faster up to 64 KiB).
  const size_t ll_threads = bytes <= (64u << 10) ? std::min(t.ll_threads, 128) : t.ll_threads;
  size_t blocks = std::min<size_t>(c.ll_blocks, ceil_div(units, std::min<size_t>(cap, ll_threads)));
  if (blocks < 1) blocks = 1;
  const size_t upb = ceil_div(units, blocks);
  int threads = static_cast<int>(std::min<size_t>(ll_threads, round_up(std::min(upb, cap), 32)));
  cudaError_t e = cudaSuccess;
  with_dtype_op(a.dtype, a.op, [&]<typename T, typename Op>() {
    e = launch_kernel(ll_allreduce<T, Op>, static_cast<unsigned>(blocks), threads, t, a.stream, c,
                      static_cast<const char*>(a.send), static_cast<char*>(a.recv), bytes, upb, a.coll);
  });
  return e;
}

}  // namespace actorcc::cuda
