// One-shot all-reduce whose data moves by copy engine ("oneshot_ce"), for large messages on 2
// ranks. Measured on 2 x H200 (tests/gpu/probes/ce_rate.py, bench/results/2026-11-30-h200x2-f):
// both GPUs' copy engines pushing into each other at once reach 383 GB/s at 64 MiB and 390 at
// 256 MiB, while SM stores top out at ~360 and LL128 at ~333 of wire; the copy engine also
// needs no fence between data and flag, because a stream runs its next copy only after the
// previous one has completed.
//
// One call, on the caller's stream S and `lanes.n` side streams:
//   S        enter kernel (1 thread): count the call, raise `enter` in every peer, wait for
//            every peer's `enter` (the peer has finished all its earlier calls, so its data
//            region is free), set the constant 1 that the copy engine copies as a flag
//   S        record `fork`; every side stream waits for it
//   side k%n chunk k: copy the input's chunk k into every peer's area for this rank, then
//            copy the constant 1 into that peer's flag[k][rank]; in place, also into our own
//            own[k] (the fold may overwrite our input only after our copies have read it)
//   S        fold kernel (every CTA a 1/CTAs share of every chunk): wait for flag[k][*] (and
//            own[k]), fold own input + the peers' copies in rank order -> output (the same
//            bits on every rank); the last CTA to finish resets the flags, raises `done` in
//            every peer and waits for every peer's `done` (then no later call of any algorithm
//            can write into a peer that is still reading)
//   S        waits for every side stream's `join` event
// Every wait is bounded by the abort word and the deadline (Spin). All of it can be captured in
// a CUDA graph: the flags are reset to 0 by their reader, so the copied constant stays 1.
#include "algorithms/cuda_algorithms.hpp"
#include "kernels/tile_reduce.cuh"

namespace actorcc::cuda {
namespace {

// Source src's area in `owner`'s data region: world - 1 equal areas, none for the owner.
__host__ __device__ inline size_t ce_area_bytes(const DeviceComm& c) {
  const size_t region = size_t(4) * c.data_blocks * c.world * c.tile_bytes;
  return region / size_t(c.world - 1) / 256 * 256;
}
__host__ __device__ inline char* ce_area(const DeviceComm& c, int owner, int src) {
  return c.ws[owner] + c.data_off + size_t(src < owner ? src : src - 1) * ce_area_bytes(c);
}

// Waits until *p >= v (one thread); false on timeout or abort.
__device__ __forceinline__ bool wait_at_least(const DeviceComm& c, Spin& spin, const unsigned long long* p,
                                              unsigned long long v, int peer, int coll) {
  while (ld_acquire_sys(p) < v)
    if (spin.expired(c, peer, coll)) return false;
  return true;
}

__global__ void ce_enter(DeviceComm c, int coll) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int me = c.rank, W = c.world;
  unsigned long long* calls = ce_word(c, me, CeWord::calls);
  const unsigned long long n = *calls + 1;
  *calls = n;
  *ce_word(c, me, CeWord::one) = 1;
  __threadfence_system();
  for (int k = 1; k < W; ++k) st_release_sys(ce_word(c, (me + k) % W, CeWord::enter + me), n);
  Spin spin;
  for (int k = 1; k < W; ++k) {
    const int q = (me + W - k) % W;
    if (!wait_at_least(c, spin, ce_word(c, me, CeWord::enter + q), n, q, coll)) return;
  }
}

template <typename T, typename Op>
__global__ void __launch_bounds__(512) ce_fold(DeviceComm c, const T* in, T* out, size_t count, size_t chunk,
                                               unsigned nch, size_t share, bool in_place, int coll) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  __shared__ int s_ok;
  const int me = c.rank, W = c.world;
  const bool vec = aligned16(in) && aligned16(out);
  const size_t area = ce_area_bytes(c);
  const char* base = c.ws[me] + c.data_off;  // the first source's area; reduce_tile skips our own entry
  Spin spin;
  bool ok = true;
  for (unsigned k = 0; k < nch && ok; ++k) {
    if (threadIdx.x == 0) {
      int good = 1;
      for (int j = 1; j < W && good; ++j) {
        const int q = (me + W - j) % W;
        good = wait_at_least(c, spin, ce_word(c, me, CeWord::flag + size_t(k) * kMaxRanks + q), 1, q, coll);
      }
      if (good && in_place) good = wait_at_least(c, spin, ce_word(c, me, CeWord::own + k), 1, me, coll);
      s_ok = good;
    }
    __syncthreads();
    ok = s_ok != 0;
    __syncthreads();  // s_ok is rewritten by the next chunk's wait
    const size_t lo = size_t(k) * chunk, hi = min(count, lo + chunk);
    const size_t a = lo + blockIdx.x * share;
    if (!ok || a >= hi) continue;
    const size_t n = min(share, hi - a);
    if (W == 2)
      reduce_tile<T, Op, 2, 2>(c, out + a, in + a, base + a * sizeof(T), area, n, vec, false, 0, true);
    else
      reduce_tile<T, Op>(c, out + a, in + a, base + a * sizeof(T), area, n, vec, false, 0, true);
  }
  // The last CTA: reset the flags for the next call, then the closing handshake.
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();
  const unsigned long long prev = atomicAdd(ce_word(c, me, CeWord::folded), 1ull);
  if ((prev + 1) % gridDim.x != 0) return;
  __threadfence();
  for (unsigned k = 0; k < nch; ++k) {
    for (int q = 0; q < W; ++q) *ce_word(c, me, CeWord::flag + size_t(k) * kMaxRanks + q) = 0;
    *ce_word(c, me, CeWord::own + k) = 0;
  }
  const unsigned long long n = *ce_word(c, me, CeWord::calls);
  __threadfence_system();
  for (int j = 1; j < W; ++j) st_release_sys(ce_word(c, (me + j) % W, CeWord::done + me), n);
  for (int j = 1; j < W; ++j) {
    const int q = (me + W - j) % W;
    if (!wait_at_least(c, spin, ce_word(c, me, CeWord::done + q), n, q, coll)) return;
  }
}

}  // namespace

size_t ce_capacity(const DeviceComm& c) { return c.world > 1 ? ce_area_bytes(c) : 0; }

cudaError_t allreduce_ce(const DeviceComm& c, const Tuning& t, const CallArgs& a, const CeLanes& lanes) {
  const size_t esz = dtype_bytes(a.dtype), epv = 16 / esz;
  const size_t bytes = a.count * esz;
  if (bytes > ce_capacity(c) || lanes.n < 1) return allreduce_twoshot_pipe(c, t, a);
  const int me = c.rank, W = c.world;
  // Chunks of about t.ce_chunk bytes (at most kMaxCeChunks), whole 16-byte words.
  const size_t want = std::min<size_t>(kMaxCeChunks, std::max<size_t>(1, ceil_div(bytes, std::max<size_t>(t.ce_chunk, 4096))));
  const size_t chunk = round_up(ceil_div(a.count, want), epv);
  const unsigned nch = static_cast<unsigned>(ceil_div(a.count, chunk));
  const unsigned blocks = static_cast<unsigned>(std::max(1, c.data_blocks));
  const size_t share = round_up(ceil_div(chunk, blocks), epv);
  const bool in_place = a.send == a.recv;

  cudaError_t e = launch_kernel(ce_enter, 1, 32, t, a.stream, c, a.coll);
  if (e != cudaSuccess) return e;
  if ((e = cudaEventRecord(lanes.fork, a.stream)) != cudaSuccess) return e;
  for (int i = 0; i < lanes.n; ++i)
    if ((e = cudaStreamWaitEvent(lanes.side[i], lanes.fork, 0)) != cudaSuccess) return e;
  const char* in = static_cast<const char*>(a.send);
  const unsigned long long* one = ce_word(c, me, CeWord::one);
  for (unsigned k = 0; k < nch; ++k) {
    cudaStream_t s = lanes.side[k % lanes.n];
    const size_t lo = size_t(k) * chunk * esz, len = std::min(chunk * esz, bytes - lo);
    for (int j = 1; j < W; ++j) {
      const int q = (me + j) % W;
      if ((e = cudaMemcpyAsync(ce_area(c, q, me) + lo, in + lo, len, cudaMemcpyDeviceToDevice, s)) != cudaSuccess) return e;
      if ((e = cudaMemcpyAsync(ce_word(c, q, CeWord::flag + size_t(k) * kMaxRanks + me), one, sizeof(*one),
                               cudaMemcpyDeviceToDevice, s)) != cudaSuccess)
        return e;
    }
    if (in_place &&
        (e = cudaMemcpyAsync(ce_word(c, me, CeWord::own + k), one, sizeof(*one), cudaMemcpyDeviceToDevice, s)) !=
            cudaSuccess)
      return e;
  }
  Tuning plain = t;
  plain.pdl = 0;  // the previous operation on the stream is the fork event, not a kernel
  with_dtype_op(a.dtype, a.op, [&]<typename T, typename Op>() {
    e = launch_kernel(ce_fold<T, Op>, blocks, static_cast<unsigned>(t.threads), plain, a.stream, c,
                      static_cast<const T*>(a.send), static_cast<T*>(a.recv), a.count, chunk, nch, share, in_place,
                      a.coll);
  });
  if (e != cudaSuccess) return e;
  for (int i = 0; i < lanes.n; ++i) {
    if ((e = cudaEventRecord(lanes.join[i], lanes.side[i])) != cudaSuccess) return e;
    if ((e = cudaStreamWaitEvent(a.stream, lanes.join[i], 0)) != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace actorcc::cuda
