// The CUDA kernels' always-on call check: how a call's descriptor (group/call_desc.hpp, two
// 64-bit words) is folded into the flags the kernels already exchange, and the words each rank
// publishes so that a waiting kernel can tell "the peer is late" from "the peer runs another
// call". Pure integer functions for host and device, unit-tested on the CPU (no CUDA headers).
//
// 1. Folding. A flag is only accepted when it carries this call's 32-bit descriptor hash h, so
//    ranks that disagree never take each other's data (no silently wrong output):
//    - uint64 flags (raise_flags / await_flags): the high 16 bits of h in the top 16 bits, step+1
//      in the low 48 (compared unsigned, as the old 64-bit steps were: 2^48 steps never wrap,
//      and a flag left from long ago never reads as ahead). A flag whose step is past the one
//      awaited is accepted whatever its hash: every flag exchange is symmetric (each rank
//      raises, then awaits the same step), so a peer got past step v only by accepting our flag
//      of step v, with our hash.
//    - LL and LL128 lines: the 32-bit flag is low32(step+1) ^ (the high 16 bits of h). Only the
//      high half: the flag's low 16 bits stay the step's own, so a stale line (an earlier step
//      of the same CTA, less than 2^16 steps back) never matches, whatever call wrote it. (With
//      all of h xored in, a stale line of another call would match whenever the two hashes
//      differ by exactly low32(s0+1) ^ low32(s+1), for some pairs of calls at every few steps.)
//      h's top bit is always set, so a zeroed slot never matches before 2^31 steps; a stale line
//      of the same call matches only 2^32 steps later, as without the hash.
//    The price of 16 bits: calls whose hashes share their high 16 bits (1 in 65536 mismatches)
//    pass the flags unseen.
// 2. Arbitration. A flag with the wrong hash is simply never accepted, so the waiter spins; every
//    1024th poll (Spin, kernels/primitives.cuh) it compares the call words: every collective
//    kernel's CTA 0 publishes (call number, h) and the descriptor into every rank's [call] row
//    (its own included) at its start. Same call number, different hash: the ranks disagree
//    (kErrMismatch, both descriptors recorded). That also covers calls whose ranks launched
//    different routes or grids, which never meet at a flag. No fence orders the words (they
//    are read only on the slow path): the descriptor is trusted once it hashes to the word's h.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define ACTORCC_HD __host__ __device__
#else
#define ACTORCC_HD
#endif

namespace actorcc::cuda {

// 32-bit hash of a descriptor's two words (splitmix64 finalizer), top bit always set (never 0).
ACTORCC_HD constexpr uint32_t call_hash(uint64_t w0, uint64_t w1) {
  uint64_t x = w0 ^ (w1 * 0x9e3779b97f4a7c15ull);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<uint32_t>(x ^ (x >> 32)) | 0x80000000u;
}

constexpr uint64_t kFlagStepMask = (uint64_t(1) << 48) - 1;
// uint64 flag of step value v (= step + 1) for a call of hash h (h = 0: the check is off).
ACTORCC_HD constexpr uint64_t flag_word(uint64_t v, uint32_t h) {
  return (uint64_t(h >> 16) << 48) | (v & kFlagStepMask);
}
// Whether flag f lets the waiter of step value v (hash h) go on: the same step with the same
// hash, or a later step (see 1. above).
ACTORCC_HD constexpr bool flag_reached(uint64_t f, uint64_t v, uint32_t h) {
  return (f & kFlagStepMask) > (v & kFlagStepMask) || f == flag_word(v, h);
}
// 32-bit flag of LL / LL128 lines.
ACTORCC_HD constexpr uint32_t line_flag(uint64_t v, uint32_t h) { return static_cast<uint32_t>(v) ^ (h & 0xffff0000u); }

// The [call] row a rank publishes: word 0 = call number << 32 | hash, words 1-2 the descriptor.
constexpr int kCallWords = 4;
ACTORCC_HD constexpr uint64_t call_word(uint32_t seq, uint32_t h) { return (uint64_t(seq) << 32) | h; }
// Whether the peer's published call is this rank's call number with another descriptor.
ACTORCC_HD constexpr bool calls_disagree(uint64_t mine, uint64_t peer) {
  return (mine >> 32) == (peer >> 32) && static_cast<uint32_t>(mine) != static_cast<uint32_t>(peer) &&
         static_cast<uint32_t>(mine) != 0 && static_cast<uint32_t>(peer) != 0;
}
// Whether a descriptor read next to a call word belongs to it (the words are not ordered).
ACTORCC_HD constexpr bool desc_matches(uint64_t word, uint64_t w0, uint64_t w1) {
  return static_cast<uint32_t>(word) == call_hash(w0, w1);
}

}  // namespace actorcc::cuda
