// all_gather by pushes: CTA b takes tiles of this rank's input (bytes; no arithmetic, so one
// kernel serves every dtype), writes each into every peer's slot for this rank, copies it to
// its own place in the output (unless in place), flags, waits for the peers' tiles and copies
// them from the local slots to their places in the output.
#include "algorithms/cuda/launch.hpp"
#include "kernels/byte_tiles.cuh"

namespace actorcc::cuda {
namespace {

__global__ void __launch_bounds__(512) allgather_kernel(DeviceComm c, const char* in, char* out, size_t nbytes,
                                                        size_t tile, size_t ntiles, int coll) {
  Step st = begin_steps(c);
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const bool vec = aligned16(in) && aligned16(out) && nbytes % 16 == 0;
  char* own_out = out + me * nbytes;
  byte_tile_steps(
      c, st, nbytes, tile, ntiles, coll,
      [&](int par, size_t lo, size_t n) {
        for (int k = 1; k < W; ++k) {
          const int q = peer_after(c, k);
          copy_bytes(data_slot(c, q, par, b, 0, me), in + lo, n, vec, false);
        }
        if (own_out != in) copy_bytes(own_out + lo, in + lo, n, vec, false);
      },
      [&](int par, size_t lo, size_t n) {
        for (int k = 1; k < W; ++k) {
          const int q = peer_after(c, k);
          copy_bytes(out + q * nbytes + lo, data_slot(c, me, par, b, 0, q), n, vec, true);
        }
      });
}

}  // namespace

cudaError_t allgather_push(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  return launch_byte_tiles(allgather_kernel, c, t, a);
}

}  // namespace actorcc::cuda
