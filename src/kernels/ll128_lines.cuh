// LL128 lines, shared by the LL128 one-shot (oneshot_ll128.cu) and two-shot
// (twoshot_ll128.cu): how a warp packs 4 128-byte lines of message bytes plus a 32-bit flag
// per line and how a receiver polls them (algorithms/cuda/ll128_grid.hpp cuts a call's groups into
// CTAs and rounds).
//
// Line layout (group g = 4 lines = one warp access; k = lane / 8, j = lane % 8):
//   lanes j < 7 carry 16 message bytes at g*D + 16*(7k + j) (16-byte aligned: D is 496 or 480);
//   lane  j = 7 carries P message bytes at g*D + 448 + P*k and the flag in its 4th word;
//   P = 12 for elements of up to 4 bytes (D = 496), 8 for 8-byte elements (D = 480), so a
//   lane always holds whole elements.
// It relies on a warp's aligned 128-byte line reaching the peer whole and being read whole by
// one warp load (NCCL's LL128 relies on the same on NVLink).
#pragma once
#include <cstdint>

#include "kernels/primitives.cuh"

namespace actorcc::cuda {

constexpr size_t kGroupSlot = 512;  // slot bytes per group (4 lines of 128)

__host__ __device__ constexpr size_t ll128_group_data(size_t esz) { return esz == 8 ? 480 : 496; }

// This lane's place in a group: P message bytes (lane 7 of a line) or 16, at `off` in the group.
template <typename T>
struct Ll128Lane {
  static constexpr unsigned P = sizeof(T) == 8 ? 8 : 12;
  static constexpr size_t D = ll128_group_data(sizeof(T));
  unsigned lane;
  bool flag_lane;
  unsigned part;
  size_t off;
  __device__ Ll128Lane() : lane(threadIdx.x % 32), flag_lane((lane & 7) == 7), part(flag_lane ? P : 16),
                           off(flag_lane ? 448 + P * (lane >> 3) : 16 * (7 * (lane >> 3) + (lane & 7))) {}
};

// n (8, 12 or 16) message bytes at `off` into a 16-byte word, zero-filled past `bytes`. The
// buffer is at least 4-byte aligned (the LL128 routes' condition, algorithms/cuda/planner.cpp); `vec`: 16-byte aligned.
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

// Pushes this lane's word of a group (flag in the flag lane's last word) to `line`.
__device__ __forceinline__ void ll128_push(char* line, uint4 v, bool flag_lane, unsigned flag) {
  if (flag_lane) v.w = flag;
  st_volatile_v4(line, v);
}

// Polls this lane's word of a group at `line` (written by `peer`) until all 4 flags of the warp's
// lines show `flag` (a stale line is reread whole). Sets `failed` on timeout or abort (recorded
// by Spin, naming the peer); the whole warp returns together.
__device__ __forceinline__ uint4 ll128_poll(const DeviceComm& c, Step& st, const char* line, bool flag_lane,
                                            unsigned flag, int peer, int coll, bool& failed) {
  const unsigned lane = threadIdx.x % 32;
  uint4 v = ld_volatile_v4(line);
  while (!failed && __any_sync(0xffffffffu, flag_lane && v.w != flag)) {
    if (__any_sync(0xffffffffu, lane == 0 && st.spin.expired(c, peer, coll))) failed = true;
    v = ld_volatile_v4(line);
  }
  return v;
}

// One round of a CTA's groups (a step: its flag, folded with the call's hash as in
// kernels/call_check.hpp, and slot parity) and how many of the round's `ng` groups this warp
// takes (groups warp, warp + nwarps, ...).
struct Ll128Round {
  unsigned flag;
  int par;
  size_t mine;
};
__device__ __forceinline__ Ll128Round ll128_round(const DeviceComm& c, const Step& st, size_t ng) {
  const unsigned warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  return {line_flag(st.s + 1, c.call_hash), static_cast<int>(st.s & 1),
          ng > warp ? (ng - warp + nwarps - 1) / nwarps : 0};
}

}  // namespace actorcc::cuda
