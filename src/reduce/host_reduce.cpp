// Host reduction math. This is the CPU backend's hot loop, so every (dtype, op) pair gets its
// own instantiation of one template (no per-element switch), and the work is done in
// fixed-size blocks: each input is folded into a small accumulator array that stays in L1,
// and the loop over a full block has a compile-time trip count so GCC vectorises it even at
// -O2 (whose "very cheap" cost model refuses loops that would need a scalar epilogue).
//
// Semantics (the CUDA kernels should keep the same rules so both backends agree):
// - float16/bfloat16 are widened to float32, reduced in float32 over all n inputs and rounded
//   once (round to nearest even).
// - integer sum/prod wrap (done in the unsigned type of the same width, so no UB).
// - avg: floats sum then divide once (in float32 for the half types, in the type otherwise);
//   integers sum exactly in 64 bits (int64 wraps) and divide truncating toward zero.
// - min/max propagate NaN: if any input is NaN the result is NaN (the last NaN in input
//   order), unlike std::min/std::max or fmin/fmax which drop it. Ties between -0 and +0 keep
//   the earlier input.
#include "reduce/host_reduce.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace actorcc {

// ---------------------------------------------------------------------------------------
// Half conversions: branch-free bit manipulation (after F. Giesen's half<->float routines),
// written with selects so the compiler can vectorise them inside the reduction loops.

namespace {
// Branch-free select through masks. A plain `c ? a : b` lets GCC move the float arithmetic
// feeding one side under a branch (it may not speculate FP ops under -ftrapping-math), and a
// loop with branches is not vectorised; mask arithmetic keeps both sides unconditional.
inline uint32_t select(bool c, uint32_t a, uint32_t b) noexcept {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return (a & m) | (b & ~m);
}

// Internal inline copies: the exported functions below are interposable in a shared library
// (-fPIC), so GCC would not inline them into the reduction loops.
inline float h2f(uint16_t h) noexcept {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;  // half exponent mask after the shift
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t u = static_cast<uint32_t>(h & 0x7fffu) << 13;  // exponent + mantissa in place
  const uint32_t exp = u & kShiftedExp;
  u += (127u - 15u) << 23;  // rebias the exponent
  // Inf/NaN: push the exponent up to 255 (keeps the NaN payload, so NaN stays NaN).
  const uint32_t infnan = u + ((128u - 16u) << 23);
  // Subnormal: let the FPU normalise it: (mantissa as float with exponent 2^-14) - 2^-14.
  const float sub = std::bit_cast<float>(u + (1u << 23)) - std::bit_cast<float>(113u << 23);
  const uint32_t subu = std::bit_cast<uint32_t>(sub);
  u = select(exp == kShiftedExp, infnan, select(exp == 0, subu, u));
  return std::bit_cast<float>(u | sign);
}

inline uint16_t f2h(float f) noexcept {
  constexpr uint32_t kF32Inf = 255u << 23;
  constexpr uint32_t kF16Max = (127u + 16u) << 23;  // 2^16: everything >= rounds to inf
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;  // 0.5f * 2^-13 scale
  uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  // Overflow / inf / NaN. NaN stays NaN and quiet, keeping the top payload bits.
  const uint32_t big = select(u > kF32Inf, 0x7e00u | ((u >> 13) & 0x3ffu), 0x7c00u);
  // Results that are half subnormals or zero: adding the magic constant makes the FPU do the
  // RNE rounding at the right bit position (needs the default rounding mode, no FTZ).
  const uint32_t small = std::bit_cast<uint32_t>(std::bit_cast<float>(u) + std::bit_cast<float>(kDenormMagic)) -
                         kDenormMagic;
  // Normal results: rebias, then round to nearest even by adding 0xfff + the lowest kept bit.
  const uint32_t mant_odd = (u >> 13) & 1u;
  const uint32_t normal = (u + ((15u - 127u) << 23) + 0xfffu + mant_odd) >> 13;
  const uint32_t r = select(u >= kF16Max, big, select(u < (113u << 23), small, normal));
  return static_cast<uint16_t>(r | (sign >> 16));
}

inline float b2f(uint16_t b) noexcept { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t f2b(float f) noexcept {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // RNE; overflow carries into inf
  const uint32_t nan = (u >> 16) | 0x0040u;                          // quiet, sign and payload top kept
  const bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(select(is_nan, nan, rounded));
}
}  // namespace

float half_to_float(uint16_t h) noexcept { return h2f(h); }
uint16_t float_to_half(float f) noexcept { return f2h(f); }
float bfloat16_to_float(uint16_t b) noexcept { return b2f(b); }
uint16_t float_to_bfloat16(float f) noexcept { return f2b(f); }

namespace {

// ---------------------------------------------------------------------------------------
// Storage types. Half types are stored as raw bits in a tag type so templates can tell them
// apart from uint16_t.
struct Half { uint16_t bits; };
struct BFloat { uint16_t bits; };

// How a storage type T is reduced for op category: Acc is the accumulator, load/store convert.
template <typename T> struct FloatTraits {
  using Acc = T;
  static Acc load(T v) { return v; }
  static T store(Acc a) { return a; }
};
template <> struct FloatTraits<Half> {
  using Acc = float;
  static Acc load(Half v) { return h2f(v.bits); }
  static Half store(Acc a) { return Half{f2h(a)}; }
};
template <> struct FloatTraits<BFloat> {
  using Acc = float;
  static Acc load(BFloat v) { return b2f(v.bits); }
  static BFloat store(Acc a) { return BFloat{f2b(a)}; }
};

template <typename T> constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat>;

// ---------------------------------------------------------------------------------------
// Ops. Each has an accumulator type per storage type, a combine step and a finish step.

// Integer sum/prod wrap: accumulate in the unsigned type of the same width. (A lazily
// evaluated trait: make_unsigned of a float is ill-formed even in an unused branch.)
template <typename T, bool = kIsFloat<T>> struct WrapAccOf { using type = typename FloatTraits<T>::Acc; };
template <typename T> struct WrapAccOf<T, false> { using type = std::make_unsigned_t<T>; };

template <typename T> struct SumOp {
  using Acc = typename WrapAccOf<T>::type;
  static Acc load(T v) {
    if constexpr (kIsFloat<T>) return FloatTraits<T>::load(v); else return static_cast<Acc>(v);
  }
  static Acc combine(Acc a, Acc x) { return static_cast<Acc>(a + x); }
  static T finish(Acc a, int) {
    if constexpr (kIsFloat<T>) return FloatTraits<T>::store(a); else return static_cast<T>(a);
  }
};

template <typename T> struct ProdOp : SumOp<T> {
  using Acc = typename SumOp<T>::Acc;
  static Acc combine(Acc a, Acc x) {
    // uint8/uint16 promote to int; multiplying as uint32 keeps it unsigned (no signed overflow).
    if constexpr (!kIsFloat<T> && sizeof(Acc) < sizeof(unsigned)) return static_cast<Acc>(unsigned(a) * unsigned(x));
    else return static_cast<Acc>(a * x);
  }
};

// Min/max in the value domain (floats widened for halves; exact, so storing back rounds nothing).
template <typename T> struct MinMaxBase {
  using Acc = std::conditional_t<kIsFloat<T>, typename FloatTraits<T>::Acc, T>;
  static Acc load(T v) {
    if constexpr (kIsFloat<T>) return FloatTraits<T>::load(v); else return v;
  }
  static T finish(Acc a, int) {
    if constexpr (kIsFloat<T>) return FloatTraits<T>::store(a); else return a;
  }
};
template <typename T> struct MinOp : MinMaxBase<T> {
  using Acc = typename MinMaxBase<T>::Acc;
  // x != x is true only for NaN: a NaN input replaces the accumulator, and a NaN accumulator
  // is kept because every comparison with it is false.
  static Acc combine(Acc a, Acc x) { return (x < a || x != x) ? x : a; }
};
template <typename T> struct MaxOp : MinMaxBase<T> {
  using Acc = typename MinMaxBase<T>::Acc;
  static Acc combine(Acc a, Acc x) { return (x > a || x != x) ? x : a; }
};

// Avg: floats sum then divide once; integers sum exactly in 64 bits (int64 itself wraps, in
// uint64) and divide truncating toward zero.
template <typename T> struct AvgOp {
  static constexpr bool kFloat = kIsFloat<T>;
  using Acc = std::conditional_t<kFloat, typename FloatTraits<T>::Acc, uint64_t>;
  static Acc load(T v) {
    if constexpr (kFloat) return FloatTraits<T>::load(v);
    else return static_cast<uint64_t>(static_cast<int64_t>(v));  // sign-extend, then wrap-safe add
  }
  static Acc combine(Acc a, Acc x) { return a + x; }
  static T finish(Acc a, int n) {
    if constexpr (kFloat) return FloatTraits<T>::store(a / static_cast<Acc>(n));
    else if constexpr (sizeof(T) <= 4) {
      // |sum| < 2^31 * n, so for n < 2^22 the quotient's rounding error in double is below
      // 1/n, its distance to any integer it is not: truncating it is exact, and a double
      // division is ~10x cheaper than a 64-bit integer one.
      if (n < (1 << 22)) return static_cast<T>(static_cast<int64_t>(static_cast<double>(static_cast<int64_t>(a)) / n));
      return static_cast<T>(static_cast<int64_t>(a) / n);
    } else {
      return static_cast<T>(static_cast<int64_t>(a) / n);
    }
  }
};

// ---------------------------------------------------------------------------------------
// The kernel. 512 accumulators: 4 KiB for 64-bit types, well inside L1 together with the
// input stream.
constexpr size_t kBlock = 512;

// float16 <-> float32 for a whole block. x86 CPUs with F16C convert 8 values per instruction
// (round to nearest even, NaN kept quiet: bit-identical to h2f/f2h, which the unit tests check
// over every pattern); elsewhere the portable loops below, which GCC vectorises.
void widen_half_portable(const uint16_t* __restrict in, float* __restrict out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = h2f(in[i]);
}
void narrow_half_portable(const float* __restrict in, uint16_t* __restrict out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = f2h(in[i]);
}
#if defined(__x86_64__)
[[gnu::target("avx,f16c")]] void widen_half_f16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  widen_half_portable(in + i, out + i, n - i);
}
[[gnu::target("avx,f16c")]] void narrow_half_f16c(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  narrow_half_portable(in + i, out + i, n - i);
}
// CPUID leaf 1 (ECX bit 28 AVX, bit 29 F16C, bit 27 OSXSAVE, then XCR0 for the YMM state)
// rather than __builtin_cpu_supports("f16c"), which clang before 15 does not know.
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const unsigned need = (1u << 27) | (1u << 28) | (1u << 29);
  if ((c & need) != need) return false;
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 6u) == 6u;  // the OS saves XMM and YMM state
}
const auto widen_half = has_f16c() ? &widen_half_f16c : &widen_half_portable;
const auto narrow_half = has_f16c() ? &narrow_half_f16c : &narrow_half_portable;
#else
const auto widen_half = &widen_half_portable;
const auto narrow_half = &narrow_half_portable;
#endif

template <typename T, typename Op> constexpr bool kIsAvg = std::is_same_v<Op, AvgOp<T>>;

// One block of up to kBlock elements. Full is a template parameter so that the full-block
// instance has a compile-time trip count (vectorised at -O2); only the last partial block of
// a call runs the runtime-length instance.
template <typename T, typename Op, bool Full>
void reduce_block(T* out, const void* const* ins_v, int n, size_t base, size_t len) {
  using Acc = typename Op::Acc;
  const size_t m = Full ? kBlock : len;
  alignas(64) Acc acc[kBlock];
  const T* __restrict first = static_cast<const T*>(ins_v[0]) + base;
  T* __restrict dst = out + base;
  if constexpr (std::is_same_v<T, Half>) {
    // float16: widen each input block in bulk, fold in float32, round once in bulk.
    alignas(64) float in[kBlock];
    widen_half(reinterpret_cast<const uint16_t*>(first), acc, m);
    for (int k = 1; k < n; ++k) {
      widen_half(reinterpret_cast<const uint16_t*>(static_cast<const T*>(ins_v[k]) + base), in, m);
      for (size_t i = 0; i < m; ++i) acc[i] = Op::combine(acc[i], in[i]);
    }
    if constexpr (kIsAvg<T, Op>)
      for (size_t i = 0; i < m; ++i) acc[i] /= static_cast<float>(n);
    // Written only after every input of this block was read, so `out` may alias an input.
    narrow_half(acc, reinterpret_cast<uint16_t*>(dst), m);
  } else {
    for (size_t i = 0; i < m; ++i) acc[i] = Op::load(first[i]);
    for (int k = 1; k < n; ++k) {
      const T* __restrict in = static_cast<const T*>(ins_v[k]) + base;
      for (size_t i = 0; i < m; ++i) acc[i] = Op::combine(acc[i], Op::load(in[i]));
    }
    // Written only after every input of this block was read, so `out` may alias an input.
    for (size_t i = 0; i < m; ++i) dst[i] = Op::finish(acc[i], n);
  }
}

template <typename T, typename Op>
void reduce_typed(void* out_v, const void* const* ins_v, int n, size_t count) {
  T* out = static_cast<T*>(out_v);
  size_t base = 0;
  for (; base + kBlock <= count; base += kBlock) reduce_block<T, Op, true>(out, ins_v, n, base, kBlock);
  if (base < count) reduce_block<T, Op, false>(out, ins_v, n, base, count - base);
}

using ReduceFn = void (*)(void*, const void* const*, int, size_t);

template <typename T>
constexpr std::array<ReduceFn, kNumRedOps> ops_for() {
  // Order matches RedOp: Sum, Prod, Min, Max, Avg.
  return {&reduce_typed<T, SumOp<T>>, &reduce_typed<T, ProdOp<T>>, &reduce_typed<T, MinOp<T>>,
          &reduce_typed<T, MaxOp<T>>, &reduce_typed<T, AvgOp<T>>};
}

// Order matches DataType: Float32, Float16, BFloat16, Float64, Int8, UInt8, Int32, Int64.
constexpr std::array<std::array<ReduceFn, kNumRedOps>, kNumDataTypes> kReduceTable{
    ops_for<float>(), ops_for<Half>(), ops_for<BFloat>(), ops_for<double>(),
    ops_for<int8_t>(), ops_for<uint8_t>(), ops_for<int32_t>(), ops_for<int64_t>()};

static_assert(sizeof(Half) == 2 && sizeof(BFloat) == 2);

template <typename I>
I saturating_from_double(double v) noexcept {
  // Only used by tests/references; clamp instead of UB for values outside the type.
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

}  // namespace

void reduce_n(void* out, const void* const* ins, int n, size_t count, DataType dtype, RedOp op) {
  const auto d = static_cast<unsigned>(dtype);
  const auto o = static_cast<unsigned>(op);
  if (count == 0 || n <= 0 || d >= kNumDataTypes || o >= kNumRedOps) return;
  kReduceTable[d][o](out, ins, n, count);
}

double load_as_double(const void* buf, size_t i, DataType dtype) noexcept {
  switch (dtype) {
    case DataType::Float32: return static_cast<const float*>(buf)[i];
    case DataType::Float16: return half_to_float(static_cast<const uint16_t*>(buf)[i]);
    case DataType::BFloat16: return bfloat16_to_float(static_cast<const uint16_t*>(buf)[i]);
    case DataType::Float64: return static_cast<const double*>(buf)[i];
    case DataType::Int8: return static_cast<const int8_t*>(buf)[i];
    case DataType::UInt8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::Int32: return static_cast<const int32_t*>(buf)[i];
    case DataType::Int64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
  }
  return 0.0;
}

void store_from_double(void* buf, size_t i, double v, DataType dtype) noexcept {
  switch (dtype) {
    // Half types go through float: double -> float -> half can double-round, which is
    // harmless for references built from values exactly representable in the target.
    case DataType::Float32: static_cast<float*>(buf)[i] = static_cast<float>(v); return;
    case DataType::Float16: static_cast<uint16_t*>(buf)[i] = float_to_half(static_cast<float>(v)); return;
    case DataType::BFloat16: static_cast<uint16_t*>(buf)[i] = float_to_bfloat16(static_cast<float>(v)); return;
    case DataType::Float64: static_cast<double*>(buf)[i] = v; return;
    case DataType::Int8: static_cast<int8_t*>(buf)[i] = saturating_from_double<int8_t>(v); return;
    case DataType::UInt8: static_cast<uint8_t*>(buf)[i] = saturating_from_double<uint8_t>(v); return;
    case DataType::Int32: static_cast<int32_t*>(buf)[i] = saturating_from_double<int32_t>(v); return;
    case DataType::Int64: static_cast<int64_t*>(buf)[i] = saturating_from_double<int64_t>(v); return;
  }
}

}  // namespace actorcc
