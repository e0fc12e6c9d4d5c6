// LL lines, shared by the LL one-shot (cuda_oneshot.cu: lines pushed into the peers' LL slots
// over NVLink) and the LL128 one-shot's host lane (cuda_oneshot_ll128.cu: lines written into
// this rank's pinned host outbox and read by the peers over PCIe). A line is one 16-byte
// st.volatile.v4 of {data.x, flag, data.y, flag}: 8 message bytes, each 4-byte half next to its
// own copy of the flag, so a reader needs no separate flag and no fence, only the hardware
// delivering each aligned 8-byte half of the store whole (kernels/primitives.cuh). NCCL relies on
// the same over NVLink and PCIe (its LL protocol is the one it uses through host memory).
#pragma once
#include <cstdint>

#include "kernels/primitives.cuh"
#include "kernels/reduce_ops.cuh"

namespace actorcc::cuda {

// 8-byte unit u of a buffer of `bytes` bytes (zero-filled past the end).
__device__ __forceinline__ uint2 load_unit(const char* p, size_t u, size_t bytes, bool al8) {
  size_t off = u * 8;
  if (al8 && off + 8 <= bytes) return *reinterpret_cast<const uint2*>(p + off);
  union { uint2 w; char c[8]; } x;
  x.w = make_uint2(0, 0);
  for (int i = 0; i < 8 && off + i < bytes; ++i) x.c[i] = p[off + i];
  return x.w;
}
__device__ __forceinline__ void store_unit(char* p, size_t u, size_t bytes, bool al8, uint2 v) {
  size_t off = u * 8;
  if (al8 && off + 8 <= bytes) {
    *reinterpret_cast<uint2*>(p + off) = v;
    return;
  }
  union { uint2 w; char c[8]; } x;
  x.w = v;
  for (int i = 0; i < 8 && off + i < bytes; ++i) p[off + i] = x.c[i];
}

// One round of a CTA's LL lines: units [base, base + nu) of `in` (a buffer of `bytes`) go out as
// lines through push(j, line) (j: the unit's index in the round); then each unit is folded in
// rank order from the own input and the line at line_of(k, j) of every other rank k, polled
// until it carries `flag`, and stored to `out`. A timeout or abort (recorded by Spin, naming the
// peer) sets `failed`, and a thread that has failed polls no more in this or later rounds; every
// thread still runs every round, so the caller's CTA barrier after each round is reached by all.
// `nap_ns`: sleep between polls of a stale line (0: none; the host lane's polls are PCIe reads,
// and stale ones take link bandwidth from the lines in flight).
template <typename T, typename Op, typename Push, typename LineOf>
__device__ __forceinline__ void ll_round(const DeviceComm& c, Step& st, const char* in, char* out, size_t bytes,
                                         bool al8, size_t base, size_t nu, unsigned flag, int coll, bool& failed,
                                         Push push, LineOf line_of, unsigned nap_ns = 0) {
  for (size_t j = threadIdx.x; j < nu; j += blockDim.x) {
    const uint2 d = load_unit(in, base + j, bytes, al8);
    push(j, make_uint4(d.x, flag, d.y, flag));
  }
  for (size_t j = threadIdx.x; j < nu && !failed; j += blockDim.x) {
    const uint2 r = reduce_word<T, Op, uint2>(c.world, [&](int k) -> uint2 {
      if (k == c.rank) return load_unit(in, base + j, bytes, al8);
      const char* line = line_of(k, j);
      uint4 v = ld_volatile_v4(line);
      while ((v.y != flag || v.w != flag) && !failed) {
        if (st.spin.expired(c, k, coll)) failed = true;
        if (nap_ns) __nanosleep(nap_ns);
        v = ld_volatile_v4(line);
      }
      return make_uint2(v.x, v.z);
    });
    if (!failed) store_unit(out, base + j, bytes, al8, r);
  }
}

}  // namespace actorcc::cuda
