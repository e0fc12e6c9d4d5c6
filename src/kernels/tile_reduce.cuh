// Reduction of one tile held in `world` places: this rank's own input (user memory) and the
// peers' pushed copies in this rank's workspace slots (slot for rank k at slot0 + k*stride).
// Optionally (`push`) the result is also stored into every peer at the same workspace offset
// `push_off` (their slot for this rank), or, given `direct`, at byte `push_off` of
// direct->p[peer] (the peer's own output: registered buffers). Inputs are folded in rank order: same bits on every
// rank.
#pragma once
#include "kernels/primitives.cuh"
#include "kernels/reduce_ops.cuh"

namespace actorcc::cuda {

// R >= world: the sources are unrolled (a thread's words stay in registers); U: 16-byte words
// per thread per source in flight (all loads of an iteration are issued before any fold; the
// pipelined two-shot uses 2 on 2 ranks). Then at most U - 1 single words, then a scalar tail.
template <typename T, typename Op, int R = kMaxRanks, int U = 1>
__device__ __forceinline__ void reduce_tile(const DeviceComm& c, T* __restrict__ out, const T* own, const char* slot0,
                                            size_t stride, size_t n, bool vec, bool push, size_t push_off,
                                            const PeerPtrs* direct = nullptr) {
  static_assert(R >= 1 && R <= kMaxRanks && U >= 1);
  const int me = c.rank, W = c.world;
  const unsigned tid = threadIdx.x, nthr = blockDim.x;
  constexpr int EPV = 16 / sizeof(T);
  const size_t nv = vec ? n / EPV : 0;
  auto load = [&](size_t i, int k) -> uint4 {
    return k == me ? reinterpret_cast<const uint4*>(own)[i] : ld_cg(slot0 + k * stride + i * 16);
  };
  // Test-only build: CTA 0 stores every word one word late (common/mutation.hpp).
  const bool shift = kMutations && c.mutation == kMutShiftTile && blockIdx.x == 0;
  auto emit = [&](size_t i, uint4 r) {
    if (shift && i + 1 < nv) ++i;
    reinterpret_cast<uint4*>(out)[i] = r;
    if (!push) return;
#pragma unroll
    for (int k = 1; k < R; ++k)
      if (k < W) {
        const int q = peer_after(c, k);
        *reinterpret_cast<uint4*>((direct ? direct->p[q] : c.ws[q]) + push_off + i * 16) = r;
      }
  };
  size_t i = tid;
  for (; i + (U - 1) * nthr < nv; i += U * nthr) {
    uint4 w[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < R; ++k)
        if (k < W) w[u][k] = load(i + u * nthr, k);
#pragma unroll
    for (int u = 0; u < U; ++u) emit(i + u * nthr, reduce_word<T, Op, uint4, R>(W, [&](int k) { return w[u][k]; }, c.mutation));
  }
  if constexpr (U > 1) {
    for (; i < nv; i += nthr) {
      uint4 w[R];
#pragma unroll
      for (int k = 0; k < R; ++k)
        if (k < W) w[k] = load(i, k);
      emit(i, reduce_word<T, Op, uint4, R>(W, [&](int k) { return w[k]; }, c.mutation));
    }
  }
  for (size_t e = nv * EPV + tid; e < n; e += nthr) {
    const T r = reduce_word<T, Op, T>(W, [&](int k) {
      return k == me ? own[e] : ld_cg_elem(reinterpret_cast<const T*>(slot0 + k * stride) + e);
    }, c.mutation);
    out[e] = r;
    if (push)
      for (int k = 1; k < W; ++k) {
        const int q = peer_after(c, k);
        reinterpret_cast<T*>((direct ? direct->p[q] : c.ws[q]) + push_off)[e] = r;
      }
  }
}

}  // namespace actorcc::cuda
