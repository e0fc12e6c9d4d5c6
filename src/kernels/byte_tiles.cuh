// The step loop of the byte-push kernels (allgather_push.cu, broadcast_push.cu): a message of
// `nbytes` cut into `ntiles` tiles of `tile` bytes (plan_byte_tiles), CTA b taking tiles b,
// b + gridDim.x, ... Per tile: push(par, lo, n) writes this rank's bytes [lo, lo + n) into the
// peers' slots of parity `par`; one flag exchange tells every peer and waits for theirs; then
// pull(par, lo, n) copies what the peers wrote from this rank's own slots. The step number
// advances once per tile on every rank alike and the slots alternate parity by step, so a slot
// is written again only after the exchange of the step between, which no peer flags before it
// has pulled from that slot. A failed exchange (timeout, abort) ends the loop.
#pragma once
#include "kernels/primitives.cuh"

namespace actorcc::cuda {

template <typename Push, typename Pull>
__device__ __forceinline__ void byte_tile_steps(const DeviceComm& c, Step& st, size_t nbytes, size_t tile,
                                                size_t ntiles, int coll, Push push, Pull pull) {
  const int b = blockIdx.x;
  for (size_t t = b; t < ntiles; t += gridDim.x) {
    const int par = static_cast<int>(st.s & 1);
    const size_t lo = t * tile, n = min(tile, nbytes - lo);
    push(par, lo, n);
    if (!exchange(c, st, 0, coll)) break;
    pull(par, lo, n);
    ++st.s;
    __syncthreads();
  }
  end_steps(c, st);
}

}  // namespace actorcc::cuda
