// One-shot all-reduce, LL protocol (small messages). Every rank pushes its whole input into
// every peer's LL slot for this rank: each 16-byte store carries 8 data bytes and two copies
// of the step flag, so the receiver needs no separate flag and no fence — it polls its own
// memory until a line's flags say "this step", and one NVLink write latency is the whole
// synchronisation cost. Each rank then folds all inputs in rank order (own input read from
// the user buffer), so every rank produces the same bits. CTA b handles a fixed slice of the
// message and only exchanges with CTA b of the other ranks.
#include "algorithms/cuda/launch.hpp"
#include "kernels/primitives.cuh"
#include "kernels/reduce_ops.cuh"

namespace actorcc::cuda {
namespace {

// 8-byte unit u of a buffer of `bytes` bytes (zero-filled past the end).
__device__ __forceinline__ uint2 load_unit(const char* p, size_t u, size_t bytes, bool al8) {
  size_t off = u * 8;
  if (al8 && off + 8 <= bytes) return *reinterpret_cast<const uint2*>(p + off);
  union { uint2 w; char c[8]; } x;
  x.w = make_uint2(0, 0);
  for (int i = 0; i < 8 && off + i < bytes; ++i) x.c[i] = p[off + i];
  return x.w;
}
__device__ __forceinline__ void store_unit(char* p, size_t u, size_t bytes, bool al8, uint2 v) {
  size_t off = u * 8;
  if (al8 && off + 8 <= bytes) {
    *reinterpret_cast<uint2*>(p + off) = v;
    return;
  }
  union { uint2 w; char c[8]; } x;
  x.w = v;
  for (int i = 0; i < 8 && off + i < bytes; ++i) p[off + i] = x.c[i];
}

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
    const size_t nu = min(cap, u1 - base);
    const unsigned flag = line_flag(st.s + 1, c.call_hash);  // with the call's hash (kernels/call_check.hpp)
    const int par = static_cast<int>(st.s & 1);
    // Push: this rank's units into slot[me] of every peer (peers in rotated order).
    for (size_t j = threadIdx.x; j < nu; j += blockDim.x) {
      uint2 d = load_unit(in, base + j, bytes, al8);
      uint4 line = make_uint4(d.x, flag, d.y, flag);
      for (int k = 1; k < W; ++k) {
        const int q = peer_after(c, k);
        st_volatile_v4(ll_slot(c, q, par, b, me) + j * 16, line);
      }
    }
    // Receive and reduce, in rank order.
    const char* mine = ll_slot(c, me, par, b, 0);
    for (size_t j = threadIdx.x; j < nu && !failed; j += blockDim.x) {
      uint2 r = reduce_word<T, Op, uint2>(W, [&](int k) -> uint2 {
        if (k == me) return load_unit(in, base + j, bytes, al8);
        const char* line = mine + (size_t)k * c.ll_slot_bytes + j * 16;
        uint4 v = ld_volatile_v4(line);
        while ((v.y != flag || v.w != flag) && !failed) {
          if (st.spin.expired(c, k, coll)) failed = true;
          v = ld_volatile_v4(line);
        }
        return make_uint2(v.x, v.z);
      });
      if (!failed) store_unit(out, base + j, bytes, al8, r);
    }
    ++st.s;
    __syncthreads();
  }
  end_steps(c, st);
}

}  // namespace

// One 8-byte unit per thread and peer per round, as many CTAs as the LL slots allow.
cudaError_t oneshot(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
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
