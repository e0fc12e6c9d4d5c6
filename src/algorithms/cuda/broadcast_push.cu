// broadcast by pushes: the root writes each tile of its input into every peer's slot for the
// root; every rank flags every other rank (the non-roots' flags carry no data, but they keep
// the root from running two steps ahead of a slow peer, which the slot reuse rule needs);
// non-roots copy the tile from their local slot to the output.
#include "algorithms/cuda/launch.hpp"
#include "kernels/byte_tiles.cuh"

namespace actorcc::cuda {
namespace {

__global__ void __launch_bounds__(512) broadcast_kernel(DeviceComm c, const char* in, char* out, size_t nbytes,
                                                        size_t tile, size_t ntiles, int root, int coll) {
  Step st = begin_steps(c);
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const bool vec = (me != root || aligned16(in)) && aligned16(out);
  byte_tile_steps(
      c, st, nbytes, tile, ntiles, coll,
      [&](int par, size_t lo, size_t n) {
        if (me != root) return;
        for (int k = 1; k < W; ++k) {
          const int q = peer_after(c, k);
          copy_bytes(data_slot(c, q, par, b, 0, me), in + lo, n, vec, false);
        }
        if (out != in) copy_bytes(out + lo, in + lo, n, vec, false);
      },
      [&](int par, size_t lo, size_t n) {
        if (me != root) copy_bytes(out + lo, data_slot(c, me, par, b, 0, root), n, vec, true);
      });
}

}  // namespace

cudaError_t broadcast_push(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  return launch_byte_tiles(broadcast_kernel, c, t, a, a.root);
}

}  // namespace actorcc::cuda
