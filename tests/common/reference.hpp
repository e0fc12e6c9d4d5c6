// Reference maths of the test workers (tests/multiprocess/mp_worker, tests/gpu/gpu_worker) and of
// actorcc-bench's exact check (tools/bench/host_data.cpp, with its own inputs): the
// inputs every rank can regenerate for every other rank, the exact result of reducing them,
// element encodings (float16/bfloat16 in software, so host-only tests need no CUDA header),
// and the poison and hash helpers of the output checks. Host code only, public API types only.
//
// Two input families:
// - Rounding (the GPU tier): float inputs m * 2^(e-12), m a signed integer of mant_bits(t, world)
//   bits, e in [0, 8) (sum, avg, min, max), +-{1, 3, 5, 7}/4 (prod). Every partial result is exact
//   in the accumulation type (float32 for float16/bfloat16/float32, float64 for float64), in any
//   order, but the final sum ROUNDS once when stored as float16/bfloat16: a reduction that
//   accumulated half types in half precision gives other bits.
// - Exact (the CPU tier): small integers, powers of two for prod, k/8 for min/max: every partial
//   result is exact in every type, so plans that store partial sums in the element type between
//   steps (the hierarchical CPU plans) still match bitwise.
// The reference folds the ranks' inputs in rank order in the accumulation type, divides avg
// once in that type, and rounds once to the element type (the contract of src/kernels and
// src/reduce/host_reduce.cpp), so outputs are compared bitwise, every dtype and op included.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "actorcc/types.hpp"

namespace actorcc::testref {

inline uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline bool is_float(DataType t) {
  return t == DataType::Float32 || t == DataType::Float16 || t == DataType::BFloat16 || t == DataType::Float64;
}

// One stream per (seed, rank, case); element i is one mix away (the checks evaluate this
// world x count times per call, so it must be cheap).
inline uint64_t stream_of(uint64_t seed, int rank, uint64_t case_id) {
  return mix(seed ^ mix(case_id * 1000003ull + static_cast<uint64_t>(rank)));
}

// ---- encodings ---------------------------------------------------------------------------
// Rounds v to the nearest value of a binary format with `mant` stored mantissa bits and
// minimum normal exponent `emin` (round half to even, as the hardware conversions do).
inline double round_to_format(double v, int mant, int emin) {
  if (v == 0 || !std::isfinite(v)) return v;
  const int e = std::max(std::ilogb(v), emin);
  const double q = std::ldexp(1.0, e - mant);  // the spacing of the format around v
  return std::nearbyint(v / q) * q;             // v / q and the product are exact in double
}
// v must be exactly representable (finite, in range).
inline uint16_t half_bits(double v) {
  v = round_to_format(v, 10, -14);
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a == 0) return sign;
  if (a >= 65520) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(std::ldexp(a, 24));  // subnormal
  int e;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  return sign | static_cast<uint16_t>((e - 1 + 15) << 10) | static_cast<uint16_t>(std::ldexp(m * 2 - 1, 10));
}
inline double half_value(uint16_t h) {
  const double s = (h >> 15) ? -1 : 1;
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return m ? NAN : s * INFINITY;
  if (e == 0) return s * std::ldexp(m, -24);
  return s * std::ldexp(1024 + m, e - 25);
}
inline uint16_t bfloat16_bits(double v) {
  const float f = static_cast<float>(round_to_format(v, 7, -126));  // exact after the rounding
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}
inline double bfloat16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Element i of buf as type t: floats rounded once (to nearest even), integers wrapped
// (two's complement, the low bytes).
inline void store(void* buf, size_t i, double v, DataType t) {
  switch (t) {
    case DataType::Float32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DataType::Float64: static_cast<double*>(buf)[i] = v; break;
    case DataType::Float16: static_cast<uint16_t*>(buf)[i] = half_bits(v); break;
    case DataType::BFloat16: static_cast<uint16_t*>(buf)[i] = bfloat16_bits(v); break;
    case DataType::Int8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(static_cast<int64_t>(v)); break;
    case DataType::UInt8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
    case DataType::Int32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(static_cast<int64_t>(v)); break;
    case DataType::Int64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
  }
}
inline void store_int(void* buf, size_t i, int64_t v, DataType t) {
  const size_t es = dtype_size(t);
  std::memcpy(static_cast<uint8_t*>(buf) + i * es, &v, es);  // low bytes: the wrap (little-endian)
}
inline double load(const void* buf, size_t i, DataType t) {
  switch (t) {
    case DataType::Float32: return static_cast<const float*>(buf)[i];
    case DataType::Float64: return static_cast<const double*>(buf)[i];
    case DataType::Float16: return half_value(static_cast<const uint16_t*>(buf)[i]);
    case DataType::BFloat16: return bfloat16_value(static_cast<const uint16_t*>(buf)[i]);
    case DataType::Int8: return static_cast<const int8_t*>(buf)[i];
    case DataType::UInt8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::Int32: return static_cast<const int32_t*>(buf)[i];
    case DataType::Int64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
  }
  return 0;
}
inline int64_t load_int(const void* buf, size_t i, DataType t) {
  switch (t) {
    case DataType::Int8: return static_cast<const int8_t*>(buf)[i];
    case DataType::UInt8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::Int32: return static_cast<const int32_t*>(buf)[i];
    default: return static_cast<const int64_t*>(buf)[i];
  }
}
// An exact integer wrapped to the type's width, as the library's integer ops wrap.
inline int64_t wrap(uint64_t v, DataType t) {
  switch (t) {
    case DataType::Int8: return static_cast<int8_t>(static_cast<uint8_t>(v));
    case DataType::UInt8: return static_cast<uint8_t>(v);
    case DataType::Int32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    default: return static_cast<int64_t>(v);
  }
}

// ---- inputs ------------------------------------------------------------------------------
enum class Values { Rounding, Exact };

// Rounding family: the widest m for which a sum over `world` ranks stays exact in the
// accumulation type, capped at the element type's own precision (so every input is exact).
inline int mant_bits(DataType t, int world) {
  int lg = 0;
  while ((1 << lg) < world) ++lg;
  const int own = t == DataType::Float16 ? 11 : t == DataType::BFloat16 ? 8 : t == DataType::Float32 ? 24 : 30;
  const int spread = t == DataType::Float64 ? 15 : 7, acc = t == DataType::Float64 ? 53 : 24;
  return std::max(1, std::min(own, acc - spread - lg));
}

// Element i of the input whose stream is `stream` (stream_of(seed, rank, case)).
inline double input(Values family, uint64_t stream, size_t i, DataType t, RedOp op, int world) {
  const uint64_t h = mix(stream + i * 0x9e3779b97f4a7c15ull);
  if (family == Values::Rounding) {
    if (is_float(t)) {
      const double sign = (h >> 63) ? -1.0 : 1.0;
      if (op == RedOp::Prod) return sign * static_cast<double>(2 * (h % 4) + 1) * 0.25;
      const int e = static_cast<int>((h >> 40) % (t == DataType::Float64 ? 16 : 8));
      const int64_t m = static_cast<int64_t>(h & ((1ull << mant_bits(t, world)) - 1));
      return std::ldexp(static_cast<double>(sign < 0 ? -m : m), e - 12);  // m == 0 gives +0
    }
    if (op == RedOp::Prod) {
      if (t == DataType::UInt8) return static_cast<double>(1 + h % 3);
      static const double v[3] = {-1, 1, 2};
      return v[h % 3];
    }
    switch (t) {
      case DataType::Int8: return static_cast<int>(h % 41) - 20;
      case DataType::UInt8: return static_cast<double>(h % 41);
      case DataType::Int32: return static_cast<double>(static_cast<int64_t>(h % 200001) - 100000);
      default: return static_cast<double>(static_cast<int64_t>(h % (1ull << 40)) - static_cast<int64_t>(1ull << 39));
    }
  }
  if (is_float(t)) {
    if (op == RedOp::Prod) {
      static const double c[] = {-2, -1, -0.5, 0.5, 1, 2};
      return c[h % 6];
    }
    if (op == RedOp::Min || op == RedOp::Max) return (static_cast<int>(h % 255) - 127) / 8.0;
    return static_cast<int>(h % 9) - 4;
  }
  if (op == RedOp::Prod) return static_cast<int>(h % 7) - 3;
  switch (t) {
    case DataType::Int8: return static_cast<int>(h % 21) - 10;
    case DataType::UInt8: return static_cast<int>(h % 21);
    case DataType::Int32: return static_cast<double>(static_cast<int64_t>(h % 2000001) - 1000000);
    default: return static_cast<double>(static_cast<int64_t>(h % 2000000000001ull) - 1000000000000ll);
  }
}

// ---- the reduction -----------------------------------------------------------------------
// The one copy of the reduction maths that the test workers and actorcc-bench's check
// (tools/bench/host_data.cpp) compare with. `x(k)` is rank k's input element, k in [0, world).

// Floats: folded in rank order in the accumulation type (float32 for float16/bfloat16/float32,
// float64 for float64), avg divided once in that type; the caller rounds the result to t once
// (store). The inputs must be exact in t.
template <typename Get>
double reduce_floats(Get&& x, int world, DataType t, RedOp op) {
  auto fold = [&](auto acc) {
    using Acc = decltype(acc);
    for (int k = 0; k < world; ++k) {
      const Acc v = static_cast<Acc>(x(k));
      if (k == 0) acc = v;
      else if (op == RedOp::Sum || op == RedOp::Avg) acc = acc + v;
      else if (op == RedOp::Prod) acc = acc * v;
      else if (op == RedOp::Min) acc = v < acc ? v : acc;
      else acc = v > acc ? v : acc;
    }
    if (op == RedOp::Avg) acc = acc / static_cast<Acc>(world);
    return static_cast<double>(acc);
  };
  return t == DataType::Float64 ? fold(0.0) : fold(0.0f);
}

// Integers: sum and prod wrap (64-bit modular arithmetic, then the type's width), min/max
// compare the values, avg sums in 64 bits and divides toward zero.
template <typename Get>
int64_t reduce_ints(Get&& x, int world, DataType t, RedOp op) {
  uint64_t acc = 0;
  int64_t ext = 0;  // min / max
  for (int k = 0; k < world; ++k) {
    const int64_t v = x(k);
    if (k == 0) { acc = static_cast<uint64_t>(v); ext = v; continue; }
    if (op == RedOp::Sum || op == RedOp::Avg) acc += static_cast<uint64_t>(v);
    else if (op == RedOp::Prod) acc *= static_cast<uint64_t>(v);
    else if (op == RedOp::Min) ext = std::min(ext, v);
    else ext = std::max(ext, v);
  }
  if (op == RedOp::Min || op == RedOp::Max) return ext;
  if (op == RedOp::Avg) return wrap(static_cast<uint64_t>(static_cast<int64_t>(acc) / world), t);  // truncates
  return wrap(acc, t);
}

// Writes element i of the reduction of xs[0..world) (rank order) into `out` as type t.
inline void store_reduced(void* out, size_t i, const double* xs, int world, DataType t, RedOp op) {
  if (is_float(t)) store(out, i, reduce_floats([&](int k) { return xs[k]; }, world, t, op), t);
  else store_int(out, i, reduce_ints([&](int k) { return static_cast<int64_t>(xs[k]); }, world, t, op), t);
}

// Inputs of `count` elements starting at element `first` of rank `rank`'s stream, encoded.
inline std::vector<uint8_t> input_bytes(Values family, uint64_t stream, size_t first, size_t count, DataType t,
                                        RedOp op, int world) {
  std::vector<uint8_t> b(count * dtype_size(t));
  for (size_t i = 0; i < count; ++i) store(b.data(), i, input(family, stream, first + i, t, op, world), t);
  return b;
}
// The expected reduction of elements [first, first + count) over the streams of every rank.
inline std::vector<uint8_t> reduced_bytes(Values family, const std::vector<uint64_t>& streams, size_t first,
                                          size_t count, DataType t, RedOp op) {
  const int world = static_cast<int>(streams.size());
  std::vector<uint8_t> b(count * dtype_size(t));
  std::vector<double> xs(world);
  for (size_t i = 0; i < count; ++i) {
    for (int k = 0; k < world; ++k) xs[k] = input(family, streams[k], first + i, t, op, world);
    store_reduced(b.data(), i, xs.data(), world, t, op);
  }
  return b;
}

// Index of the first element of `got` that differs bitwise from `want` (count if none).
inline size_t first_difference(const void* got, const void* want, size_t count, DataType t) {
  const size_t es = dtype_size(t);
  if (std::memcmp(got, want, count * es) == 0) return count;
  for (size_t i = 0; i < count; ++i)
    if (std::memcmp(static_cast<const uint8_t*>(got) + i * es, static_cast<const uint8_t*>(want) + i * es, es) != 0)
      return i;
  return count;
}

inline uint64_t fnv(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ull;
  return h;
}

// Poison: outputs are filled with it before a call, and the guard bytes after every output
// must still hold it afterwards.
constexpr uint8_t kPoison = 0xA5;
inline size_t first_unpoisoned(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != kPoison) return i;
  return n;
}

// Element offsets of a misaligned case (1..15 elements, so every dtype size is misaligned by
// 1..15 bytes for int8 up to 8..120 for 8-byte types): the input and output get different ones.
inline size_t input_offset(int k) { return static_cast<size_t>(k); }
inline size_t output_offset(int k) { return k ? static_cast<size_t>((k * 7) % 15 + 1) : 0; }

}  // namespace actorcc::testref
