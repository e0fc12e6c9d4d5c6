// Two-shot all-reduce, push protocol (large messages), and the reduce-scatter it starts with.
// The message is cut into `world` segments; segment s is owned by rank s. Tiles of every
// segment are handled by CTAs round-robin (tile t by CTA t % grid), one step per tile:
//   phase 0 (reduce-scatter): push tile t of every peer's segment into that peer's slot for
//            this rank (16-byte stores over NVLink, read straight from the user buffer),
//            flag, wait for the peers' pushes of tile t of this rank's segment;
//            fold own input + the world's copies in rank order -> this rank's output, and
//            (all-reduce only) push the folded tile into every peer's phase-1 slot;
//   phase 1 (all-gather, all-reduce only): flag, wait, copy the peers' folded tiles from the
//            local slots to the output.
// Every byte crosses NVLink once per phase in each direction, by writes only (both-way writes
// are faster than reads here). Tiles are balanced so every CTA runs the same number of rounds
// (a lone extra round would cost two flag latencies for almost no data). Each element is folded
// once, by its owner, so every rank gets the same bits.
// (A warp-pipelined variant — every warp its own push/flag/fold pipeline, the gather copy
// deferred behind the next pushes — was measured ~15% slower on 2 x H200 and was dropped.)
#include "algorithms/cuda/launch.hpp"
#include "kernels/segment_tiles.cuh"
#include "kernels/tile_reduce.cuh"

namespace actorcc::cuda {
namespace {

template <typename T, typename Op>
__global__ void __launch_bounds__(512) rs_ag(DeviceComm c, const T* in, T* out, size_t count, size_t seg, size_t tile,
                                             size_t ntiles, int gather, int coll) {
  Step st = begin_steps(c);
  const int b = blockIdx.x, me = c.rank;
  const bool vec = aligned16(in) && aligned16(out) && (seg * sizeof(T)) % 16 == 0;
  T* out_own = out + (gather ? me * seg : 0);
  const SegmentTiles tiles{count, seg, tile};
  for (size_t t = b; t < ntiles; t += gridDim.x) {
    const int par = static_cast<int>(st.s & 1);
    push_to_owners(c, tiles, in, t, par, vec, c.tile_bytes);
    if (!exchange(c, st, 0, coll)) break;
    {
      size_t lo, n = tiles.range(me, t, lo);
      const size_t push_off = data_slot(c, me, par, b, 1, me) - c.ws[me];
      reduce_tile<T, Op>(c, out_own + t * tile, in + lo, data_slot(c, me, par, b, 0, 0), c.tile_bytes, n, vec,
                         gather != 0, push_off);
    }
    if (gather) {
      if (!exchange(c, st, 1, coll)) break;
      copy_out_gathered(c, tiles, out, t, par, vec);
    }
    ++st.s;
    __syncthreads();
  }
  end_steps(c, st);
}

}  // namespace

cudaError_t launch_rs_ag(const DeviceComm& c, const Tuning& t, const CallArgs& a, size_t count, size_t seg,
                         bool gather) {
  const size_t esz = dtype_bytes(a.dtype);
  // Tiles as large as a workspace slot allows.
  const TilePlan p = plan_tiles(seg, esz, c.tile_bytes / esz, t, c.data_blocks);
  cudaError_t e = cudaSuccess;
  with_dtype_op(a.dtype, a.op, [&]<typename T, typename Op>() {
    e = launch_kernel(rs_ag<T, Op>, static_cast<unsigned>(p.blocks), t.threads, t,
                      a.stream, c, static_cast<const T*>(a.send), static_cast<T*>(a.recv), count, seg, p.tile,
                      p.ntiles, gather ? 1 : 0, a.coll);
  });
  return e;
}

cudaError_t twoshot(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  const size_t epv = 16 / dtype_bytes(a.dtype);
  const size_t seg = round_up(ceil_div(a.count, c.world), epv);
  return launch_rs_ag(c, t, a, a.count, seg, true);
}

}  // namespace actorcc::cuda
