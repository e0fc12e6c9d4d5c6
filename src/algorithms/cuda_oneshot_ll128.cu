// One-shot all-reduce, LL128 protocol (medium and large messages). Every rank pushes its
// whole input into every peer, and the receiver polls the data itself, as in the LL one-shot,
// but the flag is one 32-bit word per 128-byte line: a warp stores 4 lines (512 bytes) per
// access, and the last lane of each 8-lane line carries the step flag in its last word. The
// wire carries 128/124 of the message (+3%; LL: 2x) and there is still no fence. The line
// layout, polling and grid are in kernels/ll128_lines.cuh (shared with the LL128 two-shot).
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
// Host lane (2 ranks, from Tuning::host_share_min bytes; TUNING.md rows 39-40): NVLink is the
// limit here (the pushes alone take 50.8 us of a 16 MiB call's ~54), and each GPU's PCIe link to
// the host sits idle. So the message's last host_lane_bytes() go through pinned host memory:
// c.host_blocks extra CTAs at the end of the grid write them as LL lines into this rank's host
// outbox and fold the peer's lines from its outbox, while the LL128 CTAs move the rest. LL, not
// LL128, lines: a PCIe write or read is not known to keep a 128-byte line whole, an 8-byte half
// is what NCCL's LL relies on there too. Each lane CTA has its own step counter (device_comm.cuh).
//
// Slots: a region only LL128 lines enter (kernels/device_comm.cuh). A line left by a raw-data
// protocol could hold the current step's number in its flag word by chance (measured with an
// earlier LL128 attempt in the shared data slots), and LL checks words that are raw data here.
// Larger slices than a slot take several rounds (a step each, alternating parity, a CTA barrier
// between them), as in the LL one-shot. Own input is read from the user buffer, and every rank
// folds in rank order: the same bits everywhere.
#include "algorithms/cuda_algorithms.hpp"
#include "core/cuda_planner.hpp"
#include "kernels/ll128_lines.cuh"
#include "kernels/ll_lines.cuh"

namespace actorcc::cuda {
namespace {

// Host-lane CTA i of n: its share of the units of `in` (`bytes`, the message's tail) as LL lines
// through the host outboxes, in rounds of a slot.
template <typename T, typename Op>
__device__ __noinline__ void host_lane(const DeviceComm& c, const char* in, char* out, size_t bytes, int i, int n,
                                          int coll) {
  const unsigned idx = kMaxBlocks + i;
  Step st = begin_steps_at(c, idx);
  const size_t units = (bytes + 7) / 8, cap = c.host_slot_bytes / 16;
  const size_t per = (units + n - 1) / n, u0 = min(units, i * per), u1 = min(units, u0 + per);
  const bool al8 = ((reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) & 7u) == 0;
  bool failed = false;
  for (size_t base = u0; base < u1; base += cap) {
    const unsigned flag = static_cast<unsigned>(st.s + 1);
    const int par = static_cast<int>(st.s & 1);
    char* mine = host_slot(c, c.rank, par, i);
    ll_round<T, Op>(
        c, st, in, out, bytes, al8, base, min(cap, u1 - base), flag, coll, failed,
        [&](size_t j, uint4 line) { st_volatile_v4(mine + j * 16, line); },
        [&](int k, size_t j) -> const char* { return host_slot(c, k, par, i) + j * 16; }, c.host_nap_ns);
    ++st.s;
    __syncthreads();
  }
  end_steps(c, st, idx);
}

// The first `nv` bytes by LL128 lines over NVLink on the first gridDim.x - lanes CTAs, the rest
// by the host lane on the last `lanes` CTAs. Calls without a host share take the kernel without
// the lane (kLanes false): the lane's call costs the LL128 path 8 bytes of register spills in
// half of the types.
template <typename T, typename Op, bool kLanes>
__global__ void __launch_bounds__(512) ll128_allreduce(DeviceComm c, const char* in, char* out, size_t bytes,
                                                       size_t nv, int lanes, size_t groups_per_block,
                                                       size_t round_groups, int coll) {
  if (kLanes && blockIdx.x >= gridDim.x - lanes) {
    host_lane<T, Op>(c, in + nv, out + nv, bytes - nv, blockIdx.x - (gridDim.x - lanes), lanes, coll);
    return;
  }
  bytes = nv;
  constexpr size_t D = Ll128Lane<T>::D;
  const Ll128Lane<T> ln;
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const unsigned warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const bool vec = aligned16(in) && aligned16(out);
  const size_t groups = (bytes + D - 1) / D;
  const size_t g0 = b * groups_per_block, g1 = min(groups, g0 + groups_per_block);
  // The warp's first input load goes out before the step counter read, so the two latencies
  // overlap at the start (TUNING.md row 29: 0.2-0.4 us off 4-16 MiB).
  pdl_wait();
  // This lane's part of the warp's groups i - 1 and i.
  uint4 own{}, pushed = g0 + warp < g1 ? load_part(in, (g0 + warp) * D + ln.off, ln.part, bytes, vec) : uint4{};
  Step st = read_steps(c);
  bool failed = false;
  for (size_t base = g0; base < g1 && !failed; base += round_groups) {
    const auto [flag, par, mine] = ll128_round(st, min(round_groups, g1 - base));
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

cudaError_t allreduce_ll128(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  // Other buffers (planned or forced): the push, or the pipelined two-shot where the push is
  // slower (above push_max * 2/world).
  const size_t esz = dtype_bytes(a.dtype);
  const size_t bytes = a.count * esz;
  if (!ll128_supports(a.dtype, a.send, a.recv))
    return bytes <= t.push_max * 2 / size_t(c.world) ? allreduce_push(c, t, a) : allreduce_twoshot_pipe(c, t, a);
  const size_t nv = bytes - host_lane_bytes(bytes, c.world, c.host_blocks > 0, t);
  const Ll128Grid g = plan_ll128(ceil_div(nv, ll128_group_data(esz)), c.ll128_slot_bytes / kGroupSlot, c, t);
  // Host-lane CTAs (as wide as the LL128 ones may be: all CTAs of a grid have one size, and the
  // LL128 warps without groups idle): every lane thread gets at least 4 units (fewer CTAs for a
  // small tail).
  const unsigned threads = nv == bytes ? g.threads : static_cast<unsigned>(t.ll128_threads);
  const int lanes = nv == bytes ? 0
                                : static_cast<int>(std::min<size_t>(
                                      c.host_blocks, ceil_div(ceil_div(bytes - nv, 8), size_t(4) * threads)));
  cudaError_t e = cudaSuccess;
  with_dtype_op(a.dtype, a.op, [&]<typename T, typename Op>() {
    e = launch_kernel(lanes > 0 ? ll128_allreduce<T, Op, true> : ll128_allreduce<T, Op, false>,
                      static_cast<unsigned>(g.blocks + lanes), threads, t, a.stream, c,
                      static_cast<const char*>(a.send), static_cast<char*>(a.recv), bytes, nv, lanes,
                      g.groups_per_block, g.round_groups, a.coll);
  });
  return e;
}

}  // namespace actorcc::cuda
