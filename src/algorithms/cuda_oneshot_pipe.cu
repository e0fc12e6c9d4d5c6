// Pipelined one-shot all-reduce, raw data ("oneshot_pipe"), for large messages on 2 ranks. Every
// rank pushes its whole input into every peer at full width (16-byte stores, no flag bytes in
// the data: LL128 carries 3% of flags and measured ~333 GB/s of wire from 4 MiB up, against the
// ~362 GB/s raw pushes reach), one chunk after another, and folds a peer's chunk as soon as its
// flag is up, while its own later chunks are still in flight.
//
// A raw protocol needs a system-scope fence between a chunk's data and its flag, and a fence
// waits ~2-3 us for the link to acknowledge the stores: done by the pushing warps (once per
// CTA per chunk, or per warp: tests/gpu/TUNING.md rows 2 and 6) it left the link idle for that
// long at every chunk. Here the CTA's last warp only signals: the other warps push chunk j, arrive
// (bar.arrive, no wait) at named barrier 1 + j % 8, and go on with chunk j + 1; the signal warp
// waits at that barrier, which orders every worker's chunk-j stores before it (CTA scope), then
// fences (fence.sc.sys, cumulative) and raises flag phase 2 = (step << 16) + j + 1 in every peer.
// Flag values of later chunks and later calls are larger, so one flag word per (CTA, source)
// serves every chunk, and a reader waits for >= its chunk's value. Workers never run more than 8
// chunks ahead of the signal warp (a barrier is reused only after it completed).
//
// Each worker warp pushes chunk i, then waits for every peer's chunk i - lag and folds it (own
// input + the peers' copies, in rank order: the same bits on every rank) into the output. A
// thread folds exactly the words and tail elements it pushed (push_words and reduce_tile split
// a chunk the same way), so the call works in place: no thread overwrites input that another
// thread has yet to push.
//
// Slots: one call is one step; CTA b's (parity, b) row of the data region holds the world - 1
// sources' slices back to back, so the whole slice must fit (64 MiB on 2 ranks and 132 CTAs
// with the default 136 MiB data region); larger calls take the pipelined two-shot. Every chunk
// exchanges a flag with every peer, which keeps the parity rule of kernels/device_comm.cuh.
#include "algorithms/cuda_algorithms.hpp"
#include "kernels/tile_reduce.cuh"

namespace actorcc::cuda {
namespace {

constexpr int kChunkFlagPhase = 2;
constexpr unsigned kChunkBits = 16;   // flag = (step << 16) + chunk + 1
constexpr unsigned kMaxChunks = 1024; // chunks per CTA (well under 1 << kChunkBits)

// Source src's slice in `owner`'s row for (parity, CTA b): no entry for the owner itself.
__device__ __forceinline__ char* pipe_slice(const DeviceComm& c, int owner, int par, int b, int src,
                                            size_t slice_bytes) {
  return data_slot(c, owner, par, b, 0, 0) + size_t(src < owner ? src : src - 1) * slice_bytes;
}

// Threads 0..nthr-1 copy n elements from `in` to offset `off` of every peer's slice for this
// rank: 16-byte word i by thread i % nthr (4 in flight), tail element e by thread
// (e - words*EPV) % nthr, as reduce_tile folds them.
template <typename T>
__device__ __forceinline__ void push_words(const DeviceComm& c, const T* in, size_t n, bool vec, unsigned nthr,
                                           int par, size_t slice_bytes, size_t off) {
  constexpr int EPV = 16 / sizeof(T), U = 4;
  const int me = c.rank, W = c.world, b = blockIdx.x;
  const size_t nv = vec ? n / EPV : 0;
  const uint4* s4 = reinterpret_cast<const uint4*>(in);
  auto dst = [&](int k) {
    const int q = me + k < W ? me + k : me + k - W;
    return pipe_slice(c, q, par, b, me, slice_bytes) + off;
  };
  size_t i = threadIdx.x;
  for (; i + (U - 1) * nthr < nv; i += U * nthr) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = s4[i + u * nthr];
    for (int k = 1; k < W; ++k) {
      uint4* d = reinterpret_cast<uint4*>(dst(k));
#pragma unroll
      for (int u = 0; u < U; ++u) d[i + u * nthr] = v[u];
    }
  }
  for (; i < nv; i += nthr)
    for (int k = 1; k < W; ++k) reinterpret_cast<uint4*>(dst(k))[i] = s4[i];
  for (size_t e = nv * EPV + threadIdx.x; e < n; e += nthr)
    for (int k = 1; k < W; ++k) reinterpret_cast<T*>(dst(k))[e] = in[e];
}

// The calling warp waits until every peer's chunk flag reaches v. False on timeout or abort (or
// when another warp of the CTA has already failed).
__device__ __forceinline__ bool wait_chunk(const DeviceComm& c, Step& st, unsigned long long v, volatile int* failed,
                                           int coll) {
  const unsigned lane = threadIdx.x % 32;
  for (int k = 1; k < c.world; ++k) {
    const int q = (c.rank + c.world - k) % c.world;
    const unsigned long long* f = flag_ptr(c, c.rank, kChunkFlagPhase, blockIdx.x, q);
    while (!__all_sync(0xffffffffu, ld_acquire_sys(f) >= v))
      if (__any_sync(0xffffffffu, lane == 0 && (*failed || st.spin.expired(c, q, coll)))) return false;
  }
  return true;
}

template <typename T, typename Op>
__global__ void __launch_bounds__(544) pipe_oneshot(DeviceComm c, const T* in, T* out, size_t count,
                                                    size_t per_block, size_t chunk, unsigned lag, int coll) {
  __shared__ volatile unsigned s_pushed[16];  // chunks each worker warp has pushed
  __shared__ volatile int s_failed;
  Step st = begin_steps(c);
  if (threadIdx.x < 16) s_pushed[threadIdx.x] = 0;
  if (threadIdx.x == 0) s_failed = 0;
  __syncthreads();
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const unsigned nthr = blockDim.x - 32, lane = threadIdx.x % 32;  // workers; the last warp signals
  const unsigned nworkers = nthr / 32;
  const size_t e0 = b * per_block, n_all = count > e0 ? min(per_block, count - e0) : 0;
  const unsigned nch = static_cast<unsigned>((n_all + chunk - 1) / chunk);
  const int par = static_cast<int>(st.s & 1);
  const size_t slice_bytes = per_block * sizeof(T);
  const unsigned long long flag0 = st.s << kChunkBits;
  const bool vec = aligned16(in) && aligned16(out);
  if (threadIdx.x >= nthr) {
    // Signal warp: whenever every worker has pushed more chunks than were signalled, one fence
    // covers them all (a fence waits for the link; one per chunk measured slower than the link).
    unsigned signalled = 0;
    while (signalled < nch) {
      unsigned ready = lane < nworkers ? s_pushed[lane] : ~0u;
#pragma unroll
      for (int o = 16; o > 0; o /= 2) ready = min(ready, __shfl_xor_sync(0xffffffffu, ready, o));
      if (ready == signalled) {
        __nanosleep(64);
        continue;
      }
      __threadfence_block();  // the workers' progress words were read before the fence below
      __syncwarp();
      if (lane == 0 && !s_failed) {
        __threadfence_system();
        for (int k = 1; k < W; ++k) {
          const int q = me + k < W ? me + k : me + k - W;
          st_release_sys(flag_ptr(c, q, kChunkFlagPhase, b, me), flag0 + ready);
        }
      }
      signalled = ready;
    }
  } else {
    const unsigned warp = threadIdx.x / 32;
    for (unsigned i = 0; i < nch + lag; ++i) {
      if (i < nch) {
        const size_t lo = size_t(i) * chunk;
        if (!s_failed) push_words(c, in + e0 + lo, min(chunk, n_all - lo), vec, nthr, par, slice_bytes, lo * sizeof(T));
        __syncwarp();  // the warp's stores precede lane 0's release of its progress
        if (lane == 0) {
          __threadfence_block();
          s_pushed[warp] = i + 1;
        }
      }
      if (i < lag) continue;
      const unsigned j = i - lag;
      if (j >= nch || __any_sync(0xffffffffu, s_failed != 0)) continue;
      if (!wait_chunk(c, st, flag0 + j + 1, &s_failed, coll)) {
        s_failed = 1;
        continue;
      }
      const size_t lo = size_t(j) * chunk;
      const char* slot0 = data_slot(c, me, par, b, 0, 0) + lo * sizeof(T);  // the row: first source's slice
      if (W == 2)
        reduce_tile<T, Op, 2, 2>(c, out + e0 + lo, in + e0 + lo, slot0, slice_bytes, min(chunk, n_all - lo), vec,
                                 false, 0, true, nthr);
      else
        reduce_tile<T, Op>(c, out + e0 + lo, in + e0 + lo, slot0, slice_bytes, min(chunk, n_all - lo), vec, false, 0,
                           true, nthr);
    }
  }
  ++st.s;
  end_steps(c, st);
}

}  // namespace

bool oneshot_pipe_fits(const DeviceComm& c, const Tuning& t, size_t count, size_t esz) {
  const size_t per_block = round_up(std::max(ceil_div(count, size_t(c.data_blocks)), t.opipe_chunk / esz), 16 / esz);
  return size_t(c.world - 1) * per_block * esz <= size_t(2) * c.world * c.tile_bytes;
}

cudaError_t allreduce_oneshot_pipe(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  const size_t esz = dtype_bytes(a.dtype);
  const size_t epv = 16 / esz;
  if (!oneshot_pipe_fits(c, t, a.count, esz)) return allreduce_twoshot_pipe(c, t, a);
  // Every CTA a slice of at least one chunk; chunks of about t.opipe_chunk bytes.
  size_t per_block = round_up(std::max(ceil_div(a.count, size_t(c.data_blocks)), t.opipe_chunk / esz), epv);
  const size_t blocks = std::max<size_t>(1, ceil_div(a.count, per_block));
  per_block = round_up(ceil_div(a.count, blocks), epv);
  const size_t nch = std::min<size_t>(kMaxChunks, std::max<size_t>(1, ceil_div(per_block * esz, t.opipe_chunk)));
  const size_t chunk = round_up(ceil_div(per_block, nch), epv);
  const unsigned threads = static_cast<unsigned>(std::min(t.threads, 512) + 32);
  cudaError_t e = cudaSuccess;
  with_dtype_op(a.dtype, a.op, [&]<typename T, typename Op>() {
    e = launch_kernel(pipe_oneshot<T, Op>, static_cast<unsigned>(blocks), threads, t, a.stream, c,
                      static_cast<const T*>(a.send), static_cast<T*>(a.recv), a.count, per_block, chunk,
                      static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(t.opipe_lag, 64))), a.coll);
  });
  return e;
}

}  // namespace actorcc::cuda
