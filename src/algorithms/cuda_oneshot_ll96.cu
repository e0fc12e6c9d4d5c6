// One-shot all-reduce, LL96 protocol (medium messages, element types of up to 4 bytes). Like
// the LL one-shot, every rank pushes its whole input into every peer and the receiver polls
// the data itself (no fence, no separate flag: one NVLink write latency is the whole
// synchronisation), but each 16-byte line carries 12 data bytes and one 32-bit step flag
// ({d0, d1, d2, flag}), so the wire carries 1.33x the message instead of LL's 2x. It relies on
// a thread's aligned 16-byte store reaching the peer whole (LL relies on the same per 8 bytes).
//
// Measured (tests/gpu/TUNING.md, 2026-11-30): LL is bound by its doubled wire bytes from
// ~512 KiB up, and the fenced protocols pay ~8-11 us of fence/flag round trips on top of the
// wire time.
//
// Slots: the LL one-shot's slots (kernels/device_comm.cuh), ll_slot_bytes per (parity, CTA,
// source); larger slices take several rounds, each a step with its own parity, exactly like
// the LL one-shot. They must be slots that only flag-carrying lines ever enter: a line left in
// a slot by a raw-data protocol (push, two-shot) can hold the current step's number in its
// flag word by chance (measured: stale int32 lines accepted in the shared data slots). LL's
// lines {d, flag, d, flag} and these never pass each other's check, since stale flags are
// older step numbers (the per-CTA step counters are shared). Own input is read from the user
// buffer and every rank folds in rank order: the same bits everywhere.
#include "algorithms/cuda_algorithms.hpp"
#include "kernels/primitives.cuh"
#include "kernels/reduce_ops.cuh"

namespace actorcc::cuda {
namespace {

constexpr size_t kLineData = 12;     // data bytes per 16-byte line
constexpr size_t kGroupLines = 32;   // one warp-wide access: 32 lines, 512 bytes of slot

__host__ __device__ __forceinline__ size_t line_groups(size_t bytes) {
  return (bytes + kGroupLines * kLineData - 1) / (kGroupLines * kLineData);
}

// This lane's 12 bytes of the message (4-byte aligned), zero-filled past `bytes` (a multiple
// of the element size, so a partial line holds whole elements).
__device__ __forceinline__ uint4 load_line(const char* in, size_t off, size_t bytes) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (off + 12 <= bytes) {
    const unsigned* p = reinterpret_cast<const unsigned*>(in + off);
    v.x = p[0], v.y = p[1], v.z = p[2];
    return v;
  }
  unsigned w[3] = {0, 0, 0};
#pragma unroll
  for (int i = 0; i < 12; ++i)
    if (off + i < bytes) w[i / 4] |= unsigned(static_cast<unsigned char>(in[off + i])) << (8 * (i % 4));
  v.x = w[0], v.y = w[1], v.z = w[2];
  return v;
}
__device__ __forceinline__ void store_line(char* out, size_t off, size_t bytes, uint4 v) {
  if (off + 12 <= bytes) {
    unsigned* p = reinterpret_cast<unsigned*>(out + off);
    p[0] = v.x, p[1] = v.y, p[2] = v.z;
    return;
  }
  const unsigned w[3] = {v.x, v.y, v.z};
#pragma unroll
  for (int i = 0; i < 12; ++i)
    if (off + i < bytes) out[off + i] = static_cast<char>(w[i / 4] >> (8 * (i % 4)));
}

template <typename T, typename Op>
__global__ void __launch_bounds__(512) ll96_allreduce(DeviceComm c, const char* in, char* out, size_t bytes,
                                                      size_t groups_per_block, size_t round_groups, int coll) {
  static_assert(sizeof(T) <= 4, "a 12-byte line holds whole elements of up to 4 bytes only");
  Step st = begin_steps(c);
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const size_t groups = line_groups(bytes);
  const size_t g0 = b * groups_per_block, g1 = min(groups, g0 + groups_per_block);
  bool failed = false;
  for (size_t base = g0; base < g1 && !failed; base += round_groups) {
    const size_t ng = min(round_groups, g1 - base);
    const unsigned flag = static_cast<unsigned>(st.s + 1);
    const int par = static_cast<int>(st.s & 1);
    // Push: 32 lines per warp access into every peer's slot for this rank.
    for (size_t r = warp; r < ng; r += nwarps) {
      const size_t off = ((base + r) * kGroupLines + lane) * kLineData;
      uint4 v = load_line(in, off, bytes);
      v.w = flag;
      for (int k = 1; k < W; ++k) {
        const int q = me + k < W ? me + k : me + k - W;
        st_volatile_v4(ll_slot(c, q, par, b, me) + (r * kGroupLines + lane) * 16, v);
      }
    }
    // Receive: poll each source's line until its flag shows this step, fold in rank order.
    for (size_t r = warp; r < ng && !failed; r += nwarps) {
      const size_t off = ((base + r) * kGroupLines + lane) * kLineData;
      const uint4 sum = reduce_word<T, Op, uint4>(W, [&](int k) -> uint4 {
        if (k == me) return load_line(in, off, bytes);
        const char* line = ll_slot(c, me, par, b, k) + (r * kGroupLines + lane) * 16;
        uint4 v = ld_volatile_v4(line);
        while (v.w != flag && !failed) {
          if (st.spin.expired(c, k, coll)) failed = true;
          v = ld_volatile_v4(line);
        }
        return v;
      });
      if (!failed && off < bytes) store_line(out, off, bytes, sum);
    }
    ++st.s;
    __syncthreads();  // the slots of this parity are free again only after every warp read them
  }
  end_steps(c, st);
}

}  // namespace

bool ll96_supports(int dtype, const void* send, const void* recv) {
  const size_t esz = dtype_bytes(dtype);
  return esz <= 4 && ((reinterpret_cast<uintptr_t>(send) | reinterpret_cast<uintptr_t>(recv)) & 3u) == 0;
}

cudaError_t allreduce_ll96(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  // 8-byte elements do not fit a 12-byte line whole, and lanes move 4-byte words: those calls
  // go to the LL one-shot.
  if (!ll96_supports(a.dtype, a.send, a.recv)) return allreduce_ll(c, t, a);
  const size_t bytes = a.count * dtype_bytes(a.dtype);
  const size_t groups = line_groups(bytes);
  // At least t.ll96_min_groups line groups per CTA (small messages: fewer, busier CTAs),
  // otherwise spread over every CTA; several balanced rounds when a slice exceeds a slot.
  size_t gpb = std::max(ceil_div(groups, size_t(c.ll_blocks)), std::max<size_t>(1, t.ll96_min_groups));
  const size_t blocks = std::max<size_t>(1, ceil_div(groups, gpb));
  gpb = ceil_div(groups, blocks);
  const size_t cap = std::max<size_t>(1, c.ll_slot_bytes / (kGroupLines * 16));
  const size_t rounds = ceil_div(gpb, cap);
  const size_t round_groups = ceil_div(gpb, rounds);
  const unsigned threads = static_cast<unsigned>(std::min<size_t>(t.threads, round_groups * 32));
  cudaError_t e = cudaSuccess;
  with_dtype_op(a.dtype, a.op, [&]<typename T, typename Op>() {
    if constexpr (sizeof(T) <= 4)
      e = launch_kernel(ll96_allreduce<T, Op>, static_cast<unsigned>(blocks), threads, t, a.stream, c,
                        static_cast<const char*>(a.send), static_cast<char*>(a.recv), bytes, gpb, round_groups, a.coll);
  });
  return e;
}

}  // namespace actorcc::cuda
