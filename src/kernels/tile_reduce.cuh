// Reduction of one tile held in `world` places: this rank's own input (user memory) and the
// peers' pushed copies in this rank's workspace slots (slot for rank k at slot0 + k*stride).
// Optionally the result is also pushed to every peer at the same workspace offset `push_off`
// (their slot for this rank). Inputs are folded in rank order: same bits on every rank.
#pragma once
#include "kernels/primitives.cuh"
#include "kernels/reduce_ops.cuh"

namespace actorcc::cuda {

template <typename T, typename Op>
__device__ __forceinline__ void reduce_tile_g(const DeviceComm& c, T* __restrict__ out, const T* own, const char* slot0,
                                              size_t stride, size_t n, bool vec, bool push, size_t push_off,
                                              unsigned tid, unsigned nthr) {
  const int me = c.rank, W = c.world;
  constexpr int EPV = 16 / sizeof(T);
  const size_t nv = vec ? n / EPV : 0;
  for (size_t i = tid; i < nv; i += nthr) {
    uint4 w[kMaxRanks];
#pragma unroll
    for (int k = 0; k < kMaxRanks; ++k)
      if (k < W) w[k] = k == me ? reinterpret_cast<const uint4*>(own)[i] : ld_cg(slot0 + k * stride + i * 16);
    uint4 r = reduce_word<T, Op, uint4>(W, [&](int k) { return w[k]; });
    reinterpret_cast<uint4*>(out)[i] = r;
    if (push) {
#pragma unroll
      for (int k = 1; k < kMaxRanks; ++k)
        if (k < W) {
          int q = me + k < W ? me + k : me + k - W;
          *reinterpret_cast<uint4*>(c.ws[q] + push_off + i * 16) = r;
        }
    }
  }
  for (size_t e = nv * EPV + tid; e < n; e += nthr) {
    T r = reduce_word<T, Op, T>(W, [&](int k) {
      return k == me ? own[e] : ld_cg_elem(reinterpret_cast<const T*>(slot0 + k * stride) + e);
    });
    out[e] = r;
    if (push)
      for (int k = 1; k < W; ++k) {
        int q = me + k < W ? me + k : me + k - W;
        reinterpret_cast<T*>(c.ws[q] + push_off)[e] = r;
      }
  }
}

template <typename T, typename Op>
__device__ __forceinline__ void reduce_tile(const DeviceComm& c, T* __restrict__ out, const T* own, const char* slot0,
                                            size_t stride, size_t n, bool vec, bool push, size_t push_off) {
  reduce_tile_g<T, Op>(c, out, own, slot0, stride, n, vec, push, push_off, threadIdx.x, blockDim.x);
}

}  // namespace actorcc::cuda
