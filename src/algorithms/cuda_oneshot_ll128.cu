// One-shot all-reduce, LL128 protocol (medium and large messages). Every rank pushes its
// whole input into every peer, and the receiver polls the data itself, as in the LL one-shot,
// but the flag is one 32-bit word per 128-byte line: a warp stores 4 lines (512 bytes) per
// access, and the last lane of each 8-lane line carries the step flag in its last word. The
// wire carries 128/124 of the message (+3%; LL: 2x) and there is still no fence.
// It relies on a warp's aligned 128-byte line reaching the peer whole and being read whole by
// one warp load (NCCL's LL128 relies on the same on NVLink).
//
// Line layout (group g = 4 lines = one warp access; k = lane / 8, j = lane % 8):
//   lanes j < 7 carry 16 message bytes at g*D + 16*(7k + j) (16-byte aligned: D is 496 or 480);
//   lane  j = 7 carries P message bytes at g*D + 448 + P*k and the flag in its 4th word;
//   P = 12 for elements of up to 4 bytes (D = 496), 8 for 8-byte elements (D = 480), so a
//   lane always holds whole elements.
//
// The fold runs while the link is busy: each warp pushes its group i, then receives and folds
// its group i - 1 (tests/gpu/TUNING.md rows 10-16, 2 x H200), taking its own part of group i - 1
// from the registers it pushed it from (row 28: 0.5-0.8 us off 8-16 MiB against reading it
// again). Folding only after every push (as the LL96 one-shot, 12 data bytes per 16-byte line,
// did before this replaced it) measured 4 MiB 20.9 us for 15.3 us of wire time: the local fold
// (~3-4 us at 4 MiB) ran after the link had gone idle. A fold 2 groups behind (also with both
// own parts in registers: 0.4-0.6 us slower at 4-16 MiB, row 29), loading the next group's input
// early, batches of 2-4 groups, more CTAs per SM and pushing and receiving warp
// halves all measured no better or slower (the halves also cannot work in place: a receiving
// warp may overwrite input that a pushing warp has not read yet). Three CTAs of 256 threads per
// SM (DeviceComm::ll128_blocks) measured ~1 us faster at 1 and 16 MiB than one CTA of 512
// (row 20). The CTA barrier between rounds stays: without it 16-64 MiB ran 1.3-7 us slower
// (row 28), although each warp's own chain would order the slots' reuse.
//
// Slots: a region only LL128 lines enter (kernels/device_comm.cuh). A line left by a raw-data
// protocol could hold the current step's number in its flag word by chance (measured with an
// earlier LL128 attempt in the shared data slots), and LL checks words that are raw data here.
// Larger slices than a slot take several rounds (a step each, alternating parity, a CTA barrier
// between them), as in the LL one-shot. Own input is read from the user buffer, and every rank
// folds in rank order: the same bits everywhere.
#include "algorithms/cuda_algorithms.hpp"
#include "kernels/primitives.cuh"
#include "kernels/reduce_ops.cuh"

namespace actorcc::cuda {
namespace {

constexpr size_t kGroupSlot = 512;  // slot bytes per group (4 lines of 128)

__host__ __device__ constexpr size_t group_data(size_t esz) { return esz == 8 ? 480 : 496; }

// n (8, 12 or 16) message bytes at `off` into a 16-byte word, zero-filled past `bytes`. The
// buffer is at least 4-byte aligned (ll128_supports); `vec`: 16-byte aligned.
__device__ __forceinline__ uint4 load_part(const char* p, size_t off, unsigned n, size_t bytes, bool vec) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (off + n <= bytes) {
    if (n == 16 && vec) return *reinterpret_cast<const uint4*>(p + off);
    const unsigned* w = reinterpret_cast<const unsigned*>(p + off);
    v.x = w[0], v.y = w[1];
    if (n > 8) v.z = w[2];
    if (n > 12) v.w = w[3];
    return v;
  }
  unsigned w[4] = {0, 0, 0, 0};
  for (unsigned i = 0; i < n && off + i < bytes; ++i)
    w[i / 4] |= unsigned(static_cast<unsigned char>(p[off + i])) << (8 * (i % 4));
  return make_uint4(w[0], w[1], w[2], w[3]);
}
__device__ __forceinline__ void store_part(char* p, size_t off, unsigned n, size_t bytes, bool vec, uint4 v) {
  if (off + n <= bytes) {
    if (n == 16 && vec) {
      *reinterpret_cast<uint4*>(p + off) = v;
      return;
    }
    unsigned* w = reinterpret_cast<unsigned*>(p + off);
    w[0] = v.x, w[1] = v.y;
    if (n > 8) w[2] = v.z;
    if (n > 12) w[3] = v.w;
    return;
  }
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
  for (unsigned i = 0; i < n && off + i < bytes; ++i) p[off + i] = static_cast<char>(w[i / 4] >> (8 * (i % 4)));
}

template <typename T, typename Op>
__global__ void __launch_bounds__(512) ll128_allreduce(DeviceComm c, const char* in, char* out, size_t bytes,
                                                       size_t groups_per_block, size_t round_groups, int coll) {
  constexpr unsigned P = sizeof(T) == 8 ? 8 : 12;
  constexpr size_t D = group_data(sizeof(T));
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const bool flag_lane = (lane & 7) == 7;
  const unsigned part = flag_lane ? P : 16;
  const size_t lane_off = flag_lane ? 448 + P * (lane >> 3) : 16 * (7 * (lane >> 3) + (lane & 7));
  const bool vec = aligned16(in) && aligned16(out);
  const size_t groups = (bytes + D - 1) / D;
  const size_t g0 = b * groups_per_block, g1 = min(groups, g0 + groups_per_block);
  // The warp's first input load goes out before the step counter read, so the two latencies
  // overlap at the start (TUNING.md row 29: 0.2-0.4 us off 4-16 MiB).
  pdl_wait();
  // This lane's part of the warp's groups i - 1 and i.
  uint4 own{}, pushed = g0 + warp < g1 ? load_part(in, (g0 + warp) * D + lane_off, part, bytes, vec) : uint4{};
  Step st = read_steps(c);
  bool failed = false;
  for (size_t base = g0; base < g1 && !failed; base += round_groups) {
    const size_t ng = min(round_groups, g1 - base);
    const unsigned flag = static_cast<unsigned>(st.s + 1);
    const int par = static_cast<int>(st.s & 1);
    const size_t mine = ng > warp ? (ng - warp + nwarps - 1) / nwarps : 0;  // this warp's groups
    for (size_t i = 0; i <= mine && !failed; ++i) {
      if (i < mine) {  // push group i of this warp into every peer's slot for this rank
        const size_t r = warp + i * nwarps;
        if (base != g0 || i != 0) pushed = load_part(in, (base + r) * D + lane_off, part, bytes, vec);
        uint4 v = pushed;
        if (flag_lane) v.w = flag;
        for (int k = 1; k < W; ++k) {
          const int q = peer_after(c, k);
          st_volatile_v4(ll128_slot(c, q, par, b, me) + r * kGroupSlot + lane * 16, v);
        }
      }
      if (i > 0) {
        // Receive group i - 1: poll each source's 4 lines until all 4 flags show this step (a
        // stale line is reread whole), fold in rank order.
        const size_t r = warp + (i - 1) * nwarps;
        const size_t off = (base + r) * D + lane_off;
        const uint4 sum = reduce_word<T, Op, uint4>(W, [&](int k) -> uint4 {
          if (k == me) return own;
          const char* line = ll128_slot(c, me, par, b, k) + r * kGroupSlot + lane * 16;
          uint4 v = ld_volatile_v4(line);
          while (!failed && __any_sync(0xffffffffu, flag_lane && v.w != flag)) {
            if (__any_sync(0xffffffffu, lane == 0 && st.spin.expired(c, k, coll))) failed = true;
            v = ld_volatile_v4(line);
          }
          return v;
        });
        if (!failed) store_part(out, off, part, bytes, vec, sum);
      }
      own = pushed;
    }
    ++st.s;
    __syncthreads();  // the slots of this parity are free again only after every warp read them
  }
  end_steps(c, st);
}

bool ll128_supports(int dtype, const void* send, const void* recv) {
  const size_t align = std::max<size_t>(4, dtype_bytes(dtype));
  return ((reinterpret_cast<uintptr_t>(send) | reinterpret_cast<uintptr_t>(recv)) & (align - 1)) == 0;
}

}  // namespace

cudaError_t allreduce_ll128(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  // Lanes move 4-byte words (and 8-byte elements whole). Other buffers (planned or forced):
  // the push, or the pipelined two-shot where the push is slower (above push_max * 2/world).
  const size_t esz = dtype_bytes(a.dtype);
  const size_t bytes = a.count * esz;
  if (!ll128_supports(a.dtype, a.send, a.recv))
    return bytes <= t.push_max * 2 / size_t(c.world) ? allreduce_push(c, t, a) : allreduce_twoshot_pipe(c, t, a);
  const size_t groups = ceil_div(bytes, group_data(esz));
  // At least t.ll128_min_groups groups per CTA (small messages: fewer, busier CTAs) and
  // t.ll128_busy_groups where one CTA per SM remains, otherwise spread over every CTA; balanced
  // rounds when a slice exceeds a slot.
  const size_t busy = std::min(t.ll128_busy_groups, ceil_div(groups, size_t(std::max(1, c.data_blocks))));
  size_t gpb = std::max({ceil_div(groups, size_t(c.ll128_blocks)), t.ll128_min_groups, busy, size_t(1)});
  const size_t blocks = std::max<size_t>(1, ceil_div(groups, gpb));
  gpb = ceil_div(groups, blocks);
  const size_t cap = std::max<size_t>(1, c.ll128_slot_bytes / kGroupSlot);
  const size_t rounds = ceil_div(gpb, cap);
  const size_t round_groups = ceil_div(gpb, rounds);
  // No more warps than a round has groups.
  const unsigned threads = static_cast<unsigned>(std::min<size_t>(t.ll128_threads, round_groups * 32));
  cudaError_t e = cudaSuccess;
  with_dtype_op(a.dtype, a.op, [&]<typename T, typename Op>() {
    e = launch_kernel(ll128_allreduce<T, Op>, static_cast<unsigned>(blocks), threads, t, a.stream, c,
                      static_cast<const char*>(a.send), static_cast<char*>(a.recv), bytes, gpb, round_groups, a.coll);
  });
  return e;
}

}  // namespace actorcc::cuda
