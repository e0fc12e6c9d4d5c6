// Inputs of the benchmark's exact check, shared by the host (fill for the CPU backend, and the
// check: host_data.cpp, which reduces them with the test workers' reference,
// tests/common/reference.hpp) and the CUDA fill kernel (gpu.cu).
//
// Element i of rank r's input is a hash of (r, i), so no two ranks and no two nearby elements
// agree: a tile stored at a wrong offset, a rank's contribution missing, or an avg that never
// communicated (each rank left with its own input) all give wrong values. The values are
// chosen so the reference is exact and order-free where the library's contract says so:
// - integers: the raw hash bits (prod: odd values, so products never collapse to 0). Sum and
//   prod wrap, which the reference reproduces in 64-bit modular arithmetic.
// - floats (sum, avg, min, max): m * 2^(e-12), m a signed integer of `mant` bits, e in
//   [0, spread). Every partial sum over the ranks is then exact in the accumulation type
//   (float32 for fp16/bf16/fp32, float64 for fp64), but the final sum needs more bits than
//   fp16/bf16 hold, so it ROUNDS once when stored: a library accumulating half types in half
//   precision rounds partial sums as well and gets other bits.
// - floats (prod): +-{1, 3, 5, 7}/4; products of up to 8 ranks are exact in float32 and round
//   once in fp16/bf16.
// The reference (reduce_floats / reduce_ints) folds in rank order in the accumulation type
// (the kernels' order) and rounds once, so results are compared bitwise, avg included (the
// division is done as the library documents it, in the accumulation type).
// NCCL is checked with `exact_in_type` inputs: its ring carries fp16/bf16 partial sums between
// GPUs in the element type (rounding at every hop, by design) and its avg scales before it
// sums, so its half-type inputs keep every partial result exact in the element type itself
// (one exponent, fewer bits; prod +-{0.5, 1, 2}) and its float avg gets a relative tolerance.
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define BENCH_HD __host__ __device__
#else
#define BENCH_HD
#endif

namespace actorcc::bench {

// Mirrors actorcc::Collective / RedOp / DataType numbering (kept as ints so device code needs
// no actorcc header).
enum : int { kAllReduce = 0, kReduceScatter = 1, kAllGather = 2, kBroadcast = 3, kSendRecv = 7, kAllToAll = 8 };
enum : int { kSum = 0, kProd = 1, kMin = 2, kMax = 3, kAvg = 4 };
enum : int { kF32 = 0, kF16 = 1, kBF16 = 2, kF64 = 3, kI8 = 4, kU8 = 5, kI32 = 6, kI64 = 7 };

struct Pattern {
  int coll = kAllReduce;
  int op = kSum;
  int dtype = kF32;
  int world = 1;
  int rank = 0;
  int root = 0;
  int mant = 1;      // float inputs: bits of m (make_pattern)
  int spread = 8;    // float inputs: exponents e in [0, spread)
  bool exact_in_type = false;
  size_t chunk = 0;  // reduce_scatter: per-rank output count; all_gather: per-rank input count;
                     // all_to_all: per-peer block
};

// Fills in the dtype-dependent part: the widest m for which a sum over `world` ranks stays
// exact in the accumulation type (24 bits for float32, 53 for float64; with exact_in_type, in
// the element type), capped at the element type's own precision so every input is exact.
inline Pattern make_pattern(int coll, int op, int dtype, int world, int rank, int root, size_t chunk,
                            bool exact_in_type = false) {
  Pattern p{coll, op, dtype, world, rank, root, 1, 8, exact_in_type, chunk};
  int lg = 0;
  while ((1 << lg) < world) ++lg;
  const bool half = dtype == kF16 || dtype == kBF16;
  const int own = dtype == kF16 ? 11 : dtype == kBF16 ? 8 : dtype == kF32 ? 24 : 30;
  p.spread = dtype == kF64 ? 16 : (exact_in_type && half) ? 1 : 8;
  const int acc_bits = (dtype == kF64 ? 53 : (exact_in_type && half) ? own : 24) - (p.spread - 1);
  const int m = acc_bits - lg;
  p.mant = m < 1 ? 1 : (m < own ? m : own);
  return p;
}

BENCH_HD inline uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
BENCH_HD inline uint64_t cell(int r, size_t i) { return mix(static_cast<uint64_t>(i) * 0x100000001b3ull ^ mix(static_cast<uint64_t>(r) + 1)); }

BENCH_HD inline bool is_float_type(int dtype) { return dtype <= kF64; }

// Element i of rank r's input, float types (exactly representable in the element type).
BENCH_HD inline double float_input(const Pattern& p, int r, size_t i) {
  const uint64_t h = cell(r, i);
  const bool neg = (h >> 63) & 1;
  if (p.op == kProd) {
    const bool pow2 = p.exact_in_type && (p.dtype == kF16 || p.dtype == kBF16);
    const double mag = pow2 ? static_cast<double>(1 << (h % 3)) * 0.5 : static_cast<double>(2 * (h % 4) + 1) * 0.25;
    return neg ? -mag : mag;
  }
  const int e = static_cast<int>((h >> 40) % p.spread);
  const int64_t m = static_cast<int64_t>(h & ((1ull << p.mant) - 1));
  double v = static_cast<double>(neg ? -m : m);  // an integer: m == 0 gives +0, never -0
  for (int k = 0; k < 12 - e; ++k) v *= 0.5;      // exact scaling by 2^(e-12)
  for (int k = 0; k < e - 12; ++k) v *= 2.0;
  return v;
}

// Element i of rank r's input, integer types: the value the element type holds.
BENCH_HD inline int64_t int_input(const Pattern& p, int r, size_t i) {
  uint64_t h = cell(r, i);
  if (p.op == kProd) h |= 1;
  switch (p.dtype) {
    case kI8: return static_cast<int8_t>(static_cast<uint8_t>(h));
    case kU8: return static_cast<uint8_t>(h);
    case kI32: return static_cast<int32_t>(static_cast<uint32_t>(h));
    default:  // int64: avg's 64-bit sum must not wrap, so 48-bit values there
      return p.op == kAvg ? static_cast<int64_t>(h >> 16) - (int64_t(1) << 47) : static_cast<int64_t>(h);
  }
}

// What a receive buffer holds before a checked call: all bytes 0xFF (NaN in every float type,
// which no correct result is; -1 or the type's maximum for integers, which a correct integer
// result equals with probability 2^-bits per element).
inline constexpr int kSentinelByte = 0xFF;

}  // namespace actorcc::bench
