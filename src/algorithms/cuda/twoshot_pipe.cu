// Pipelined two-shot all-reduce ("twoshot_pipe"), for large messages. Same data movement as
// twoshot.cu (reduce-scatter by pushing each segment's tile to its owner, the owner folds
// in rank order and pushes the folded tile into every peer's phase-1 slot), but each CTA streams
// its tiles without waiting for a tile's all-gather before starting the next tile:
//
//   iteration i (tile t_i, step s = s0 + i, parity s & 1):
//     A  push tile t_i of every peer's segment into that peer's phase-0 slot; flag phase 0 = s+1
//     C  wait for the peers' phase-1 flags of step s-1, copy the previous tile's all-gathered
//        results from the local phase-1 slots (parity (s-1) & 1) to the output
//     D  wait for the peers' phase-0 flags of step s, fold own input + the world's copies in rank
//        order -> own output; push the folded tile into every peer's phase-1 slot (parity s & 1)
//     E  flag phase 1 = s+1
//   after the last tile: wait for the last phase-1 flags, copy out.
//
// So the all-gather wait and the local copy-out of tile i-1 run while tile i's reduce-scatter
// pushes are in flight, and there is one flag round trip less on the critical path per tile.
// Slot reuse (two parities, as everywhere): our phase-0 write of step s+2 into a peer (A of
// iteration i+2) comes after C of iteration i+1, where we saw the peer's phase-1 flag of step s,
// which the peer raises after its fold of step s has read its phase-0 slots; our phase-1 write of
// step s+2 (D of i+2) comes after the peer's phase-0 flag of step s+2, which it raises after its
// copy-out of step s (C of its iteration i+1, a barrier before the flag). At exit we have seen
// every peer's phase-1 flag of the last step, so every peer has finished all earlier steps and
// read the last step's phase-0 slots; the only slot still in use is the last step's phase-1
// slot, which any kernel writes only after a phase-0 flag of a later step (the peer is then in
// that later kernel). That is the
// invariant of kernels/device_comm.cuh. Each element is folded once, by its owner, in rank
// order: the same bits on every rank.
//
// Registered outputs (`direct`, CallArgs::direct): D stores the folded tile straight into every
// peer's output, and C only waits for the peers' phase-1 flags (they order the peers' stores
// into our output before our kernel ends, and keep the phase-0 slot reuse above); there is no
// copy-out, and as the phase-1 slots go unused, each source's reduce-scatter slot spans two
// tiles of the (parity, CTA) block (source s at byte s * 2 * tile_bytes), so tiles can be twice
// as large. Within a direct call nothing reads the phase-1 half. After a call that was not
// direct, our first wide write of that parity (step s+2, A of iteration 2) follows our D of
// iteration 1, which saw the peer's phase-0 flag of step s+1: the peer was then in the new
// kernel, so the old kernel's final copy-out from the phase-1 half was done.
// Before its first flag every CTA stores the call descriptor into each peer's [desc]
// word; after its first phase-0 wait it compares the peers' with its own, so a call whose ranks
// used different registrations, offsets, counts, types or ops fails (kErrMismatch, naming the
// peer) before any store into a peer's output.
#include "algorithms/cuda/launch.hpp"
#include "kernels/segment_tiles.cuh"
#include "kernels/tile_reduce.cuh"

namespace actorcc::cuda {
namespace {

// Raises flag `ph` = v in every peer after the CTA's data stores.
__device__ __forceinline__ void pipe_signal(const DeviceComm& c, int ph, unsigned long long v) {
  __syncthreads();
  if (threadIdx.x == 0) raise_flags(c, ph, v);
}
// Thread 0 compares every peer's call descriptor with ours (after a flag that follows it); the
// whole CTA returns the verdict.
__device__ __forceinline__ bool descriptors_agree(const DeviceComm& c, unsigned long long desc, int coll) {
  bool same = true;
  if (threadIdx.x == 0) {
    const volatile unsigned long long* d =
        reinterpret_cast<const unsigned long long*>(c.ws[c.rank] + c.desc_off) + size_t(blockIdx.x) * kMaxRanks;
    for (int q = 0; q < c.world && same; ++q)
      if (q != c.rank && d[q] != desc) {
        record_error(c, kErrMismatch, q, coll);
        same = false;
      }
  }
  return cta_verdict(same);
}

// Bytes between two sources' reduce-scatter slots in a (parity, CTA) block: direct mode never
// uses the phase-1 slots, so each source's slot spans two tiles there (see the note above).
__host__ __device__ inline size_t rs_stride(const DeviceComm& c, const PeerPtrs& direct) {
  return direct.registered() ? 2 * c.tile_bytes : c.tile_bytes;
}

// Waits until every peer's flag `ph` >= v; the whole CTA returns the verdict.
__device__ __forceinline__ bool pipe_wait(const DeviceComm& c, Step& st, int ph, unsigned long long v, int coll) {
  return cta_verdict(threadIdx.x != 0 || await_flags(c, st, ph, v, coll));
}

template <typename T, typename Op>
__global__ void __launch_bounds__(512) rs_ag_pipe(DeviceComm c, const T* in, T* out, size_t count, size_t seg,
                                                  size_t tile, size_t ntiles, unsigned long long desc,
                                                  const __grid_constant__ PeerPtrs direct, int coll) {
  Step st = begin_steps(c);
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const bool vec = aligned16(in) && aligned16(out) && (seg * sizeof(T)) % 16 == 0;
  T* out_own = out + me * seg;
  const SegmentTiles tiles{count, seg, tile};
  const bool to_peers = direct.registered();
  const PeerPtrs* dp = to_peers ? &direct : nullptr;
  const size_t stride = rs_stride(c, direct);
  bool failed = false;
  size_t prev_t = 0;
  bool have_prev = false;
  if (threadIdx.x == 0 && b < ntiles)  // the descriptor precedes this CTA's first flag
    for (int q = 0; q < W; ++q)
      if (q != me) reinterpret_cast<unsigned long long*>(c.ws[q] + c.desc_off)[size_t(b) * kMaxRanks + me] = desc;
  for (size_t t = b; t < ntiles; t += gridDim.x) {
    const int par = static_cast<int>(st.s & 1);
    // A: reduce-scatter pushes of this tile, then the phase-0 flag.
    push_to_owners(c, tiles, in, t, par, vec, stride);
    pipe_signal(c, 0, st.s + 1);
    // C: the previous tile's all-gather (flag value = previous step + 1 = st.s).
    if (have_prev) {
      if (!pipe_wait(c, st, 1, st.s, coll)) { failed = true; break; }
      if (!to_peers) copy_out_gathered(c, tiles, out, prev_t, par ^ 1, vec);
    }
    // D: fold this tile and push the result to every peer; E: phase-1 flag.
    if (!pipe_wait(c, st, 0, st.s + 1, coll)) { failed = true; break; }
    if (!have_prev && !descriptors_agree(c, desc, coll)) { failed = true; break; }
    {
      size_t lo, n = tiles.range(me, t, lo);
      const size_t push_off =
          to_peers ? (me * seg + t * tile) * sizeof(T) : size_t(data_slot(c, me, par, b, 1, me) - c.ws[me]);
      // 2 ranks (the measured case): 2 words per thread per source in flight; more ranks: 1.
      if (W == 2)
        reduce_tile<T, Op, 2, 2>(c, out_own + t * tile, in + lo, data_slot(c, me, par, b, 0, 0), stride, n, vec,
                                 true, push_off, dp);
      else
        reduce_tile<T, Op>(c, out_own + t * tile, in + lo, data_slot(c, me, par, b, 0, 0), stride, n, vec, true,
                           push_off, dp);
    }
    pipe_signal(c, 1, st.s + 1);
    prev_t = t;
    have_prev = true;
    ++st.s;
  }
  if (!failed && have_prev) {
    if (pipe_wait(c, st, 1, st.s, coll) && !to_peers)
      copy_out_gathered(c, tiles, out, prev_t, static_cast<int>((st.s - 1) & 1), vec);
  }
  end_steps(c, st);
}

}  // namespace

cudaError_t twoshot_pipe(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  const size_t esz = dtype_bytes(a.dtype);
  const size_t epv = 16 / esz;
  const size_t count = a.count;
  const size_t seg = round_up(ceil_div(count, c.world), epv);
  // Tiles of at most pipe_tile bytes (and a workspace slot). Direct mode (the kernel's
  // `to_peers`) never uses the phase-1 slots, so each source's reduce-scatter slot takes two
  // tiles of the block and tiles may be twice as large: one tile per CTA at 64 MiB instead of
  // two, two fewer phase ends (measured faster at 64 MiB: docs/perf/tuning.md).
  const bool direct = a.direct.registered();
  const size_t limit = std::max<size_t>(t.pipe_tile, 4096) * (direct ? 2 : 1);
  const size_t max_tile = std::max(epv, std::min(rs_stride(c, a.direct), limit) / esz / epv * epv);
  const TilePlan p = plan_tiles(seg, esz, max_tile, t, c.data_blocks);
  cudaError_t e = cudaSuccess;
  with_dtype_op(a.dtype, a.op, [&]<typename T, typename Op>() {
    e = launch_kernel(rs_ag_pipe<T, Op>, static_cast<unsigned>(p.blocks), t.threads, t, a.stream, c,
                      static_cast<const T*>(a.send), static_cast<T*>(a.recv), count, seg, p.tile, p.ntiles, a.desc,
                      a.direct, a.coll);
  });
  return e;
}

}  // namespace actorcc::cuda
