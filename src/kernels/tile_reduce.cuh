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


// As reduce_word, with the source loop unrolled over R >= world sources (compile-time indices,
// so a caller's array of prefetched words stays in registers). Same fold order: same bits.
template <typename T, typename Op, int R, typename Word, typename Get>
__device__ __forceinline__ Word reduce_word_unrolled(int world, Get get) {
  constexpr int N = sizeof(Word) / sizeof(T);
  union U { Word w; T e[N]; };
  U u;
  u.w = get(0);
  typename Op::Acc acc[N];
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = Op::load(u.e[i]);
#pragma unroll
  for (int k = 1; k < R; ++k) {
    if (k < world) {
      u.w = get(k);
#pragma unroll
      for (int i = 0; i < N; ++i) acc[i] = Op::combine(acc[i], Op::load(u.e[i]));
    }
  }
#pragma unroll
  for (int i = 0; i < N; ++i) u.e[i] = Op::finish(acc[i], world);
  return u.w;
}

// reduce_tile with push, for world <= R: U 16-byte words per thread per source in flight (all
// loads of an iteration are issued before any fold), used by the pipelined two-shot.
template <typename T, typename Op, int R, int U>
__device__ __forceinline__ void reduce_tile_unrolled(const DeviceComm& c, T* __restrict__ out, const T* own,
                                                     const char* slot0, size_t stride, size_t n, bool vec,
                                                     size_t push_off) {
  const int me = c.rank, W = c.world;
  const unsigned tid = threadIdx.x, nthr = blockDim.x;
  constexpr int EPV = 16 / sizeof(T);
  const size_t nv = vec ? n / EPV : 0;
  size_t i = tid;
  for (; i + (U - 1) * nthr < nv; i += U * nthr) {
    uint4 w[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < R; ++k)
        if (k < W)
          w[u][k] = k == me ? reinterpret_cast<const uint4*>(own)[i + u * nthr]
                            : ld_cg(slot0 + k * stride + (i + u * nthr) * 16);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      uint4 r = reduce_word_unrolled<T, Op, R, uint4>(W, [&](int k) { return w[u][k]; });
      reinterpret_cast<uint4*>(out)[i + u * nthr] = r;
#pragma unroll
      for (int k = 1; k < R; ++k)
        if (k < W) {
          int q = me + k < W ? me + k : me + k - W;
          *reinterpret_cast<uint4*>(c.ws[q] + push_off + (i + u * nthr) * 16) = r;
        }
    }
  }
  // The rest: fewer than U words for this thread, then the scalar tail.
  for (; i < nv; i += nthr) {
    uint4 w[R];
#pragma unroll
    for (int k = 0; k < R; ++k)
      if (k < W) w[k] = k == me ? reinterpret_cast<const uint4*>(own)[i] : ld_cg(slot0 + k * stride + i * 16);
    uint4 r = reduce_word_unrolled<T, Op, R, uint4>(W, [&](int k) { return w[k]; });
    reinterpret_cast<uint4*>(out)[i] = r;
#pragma unroll
    for (int k = 1; k < R; ++k)
      if (k < W) {
        int q = me + k < W ? me + k : me + k - W;
        *reinterpret_cast<uint4*>(c.ws[q] + push_off + i * 16) = r;
      }
  }
  for (size_t e = nv * EPV + tid; e < n; e += nthr) {
    T r = reduce_word<T, Op, T>(W, [&](int k) {
      return k == me ? own[e] : ld_cg_elem(reinterpret_cast<const T*>(slot0 + k * stride) + e);
    });
    out[e] = r;
    for (int k = 1; k < W; ++k) {
      int q = me + k < W ? me + k : me + k - W;
      reinterpret_cast<T*>(c.ws[q] + push_off)[e] = r;
    }
  }
}

}  // namespace actorcc::cuda
