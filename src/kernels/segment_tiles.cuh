// The two-shot kernels' view of a message (twoshot.cu, twoshot_pipe.cu): `world`
// segments of `seg` elements, rank s owning elements [s*seg, min(count, (s+1)*seg)), each cut
// into tiles of `tile` elements that CTAs take round-robin. Also the two data movements both
// kernels make per tile: the reduce-scatter push of every peer's part, and the copy-out of the
// peers' folded parts after the all-gather.
#pragma once
#include "kernels/primitives.cuh"

namespace actorcc::cuda {

struct SegmentTiles {
  size_t count, seg, tile;
  // Tile t of segment s: its first element in `lo`; returns its element count (0 past the end).
  __device__ __forceinline__ size_t range(int s, size_t t, size_t& lo) const {
    const size_t s_lo = s * seg, s_hi = min(count, s_lo + seg);
    lo = s_lo + t * tile;
    const size_t hi = min(s_hi, lo + tile);
    return hi > lo ? hi - lo : 0;
  }
};

// Pushes tile t of every peer's segment of `in` into that peer's phase-0 slot for this rank
// (parity `par`, this CTA's slots), straight from the user buffer. Source src's slot starts
// src * stride bytes into the (parity, CTA) block: stride = tile_bytes normally; the pipelined
// two-shot's direct mode, which leaves the phase-1 half of the block unused, doubles it.
template <typename T>
__device__ __forceinline__ void push_to_owners(const DeviceComm& c, const SegmentTiles& st, const T* in, size_t t,
                                               int par, bool vec, size_t stride) {
  for (int k = 1; k < c.world; ++k) {
    const int q = peer_after(c, k);
    size_t lo;
    const size_t n = st.range(q, t, lo);
    copy_bytes(data_slot(c, q, par, blockIdx.x, 0, 0) + c.rank * stride, reinterpret_cast<const char*>(in + lo),
               n * sizeof(T), vec, false);
  }
}

// Copies tile t of every peer's segment, folded by its owner and pushed into this rank's
// phase-1 slots (parity `par`), to the output.
template <typename T>
__device__ __forceinline__ void copy_out_gathered(const DeviceComm& c, const SegmentTiles& st, T* out, size_t t,
                                                  int par, bool vec) {
  for (int k = 1; k < c.world; ++k) {
    const int q = peer_after(c, k);
    size_t lo;
    const size_t n = st.range(q, t, lo);
    copy_bytes(reinterpret_cast<char*>(out + lo), data_slot(c, c.rank, par, blockIdx.x, 1, q), n * sizeof(T), vec,
               true);
  }
}

}  // namespace actorcc::cuda
