// broadcast by pushes: the root writes each tile of its input into every peer's slot for the
// root; every rank flags every other rank (the non-roots' flags carry no data, but they keep
// the root from running two steps ahead of a slow peer, which the slot reuse rule needs);
// non-roots copy the tile from their local slot to the output.
#include "algorithms/cuda/launch.hpp"
#include "kernels/primitives.cuh"

namespace actorcc::cuda {
namespace {

__global__ void __launch_bounds__(512) broadcast_kernel(DeviceComm c, const char* in, char* out, size_t nbytes,
                                                        size_t tile, size_t ntiles, int root, int coll) {
  Step st = begin_steps(c);
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const bool vec = (me != root || aligned16(in)) && aligned16(out);
  for (size_t t = b; t < ntiles; t += gridDim.x) {
    const int par = static_cast<int>(st.s & 1);
    const size_t lo = t * tile, n = min(tile, nbytes - lo);
    if (me == root) {
      for (int k = 1; k < W; ++k) {
        const int q = peer_after(c, k);
        copy_bytes(data_slot(c, q, par, b, 0, me), in + lo, n, vec, false);
      }
      if (out != in) copy_bytes(out + lo, in + lo, n, vec, false);
    }
    if (!exchange(c, st, 0, coll)) break;
    if (me != root) copy_bytes(out + lo, data_slot(c, me, par, b, 0, root), n, vec, true);
    ++st.s;
    __syncthreads();
  }
  end_steps(c, st);
}

}  // namespace

cudaError_t broadcast_push(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  const size_t nbytes = a.count * dtype_bytes(a.dtype);
  const TilePlan p = plan_byte_tiles(nbytes, c, t);
  return launch_kernel(broadcast_kernel, static_cast<unsigned>(p.blocks), t.threads, t, a.stream, c,
                       static_cast<const char*>(a.send), static_cast<char*>(a.recv), nbytes, p.tile, p.ntiles, a.root,
                       a.coll);
}

}  // namespace actorcc::cuda
