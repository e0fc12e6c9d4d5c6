// Element maths of the adapted reductions, compiled as host code (CPU backend, tests) and as
// device code (adapt_kernels.cu) from this one text, so both backends store the same bits.
// The small float formats (float16, bfloat16, fp8 e4m3 and e5m2) are coded in software from
// double: every value of them is exact in double, so decoding is exact and encoding rounds once
// (to nearest, ties to even), whatever width the value came from.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ACTORCC_HD __host__ __device__ __forceinline__
#else
#define ACTORCC_HD inline
#endif

namespace actorcc::ncclabi {

// ncclDataType_t and ncclRedOp_t values (nccl.h; checked against it in tests/nccl).
enum NcclType : int {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kFloat8e4m3 = 10, kFloat8e5m2 = 11,
  kNumTypes = 12,
};
enum NcclOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kNumOps = 5 };

ACTORCC_HD int nccl_type_size(int t) {
  switch (t) {
    case kInt8: case kUint8: case kFloat8e4m3: case kFloat8e5m2: return 1;
    case kFloat16: case kBfloat16: return 2;
    case kInt32: case kUint32: case kFloat32: return 4;
    case kInt64: case kUint64: case kFloat64: return 8;
    default: return 0;
  }
}

// <cmath> in host code, CUDA's math library in device code.
#if defined(__CUDA_ARCH__)
#define ACTORCC_MATH(f) ::f
#else
#define ACTORCC_MATH(f) std::f
#endif
ACTORCC_HD double m_ldexp(double v, int e) { return ACTORCC_MATH(ldexp)(v, e); }
ACTORCC_HD int m_ilogb(double v) { return ACTORCC_MATH(ilogb)(v); }
ACTORCC_HD double m_rint(double v) { return ACTORCC_MATH(rint)(v); }  // half to even (default mode)
ACTORCC_HD bool m_isnan(double v) { return v != v; }
ACTORCC_HD bool m_signbit(double v) {
  uint64_t b;
  memcpy(&b, &v, 8);
  return (b >> 63) != 0;
}
#undef ACTORCC_MATH

// ---- small float formats ------------------------------------------------------------------
// ebits/mbits: exponent and stored mantissa widths. `ieee`: the all-ones exponent holds inf and
// NaN (float16, bfloat16, e5m2); otherwise only all-ones exponent and mantissa is NaN (e4m3,
// which has no inf). `satfinite`: out-of-range values and +-inf become the largest finite
// value of their sign (NCCL converts to fp8 with __NV_SATFINITE); otherwise they become inf.
struct SmallFloat {
  int ebits, mbits;
  bool ieee, satfinite;
};
ACTORCC_HD constexpr SmallFloat half_fmt() { return {5, 10, true, false}; }
ACTORCC_HD constexpr SmallFloat bf16_fmt() { return {8, 7, true, false}; }
ACTORCC_HD constexpr SmallFloat e4m3_fmt() { return {4, 3, false, true}; }
ACTORCC_HD constexpr SmallFloat e5m2_fmt() { return {5, 2, true, true}; }

ACTORCC_HD int fmt_bias(SmallFloat f) { return (1 << (f.ebits - 1)) - 1; }
ACTORCC_HD uint32_t fmt_exp_all(SmallFloat f) { return (1u << f.ebits) - 1; }
// The largest finite code (without sign) and its value.
ACTORCC_HD uint32_t fmt_max_code(SmallFloat f) {
  const uint32_t mall = (1u << f.mbits) - 1;
  return f.ieee ? (((fmt_exp_all(f) - 1) << f.mbits) | mall) : ((fmt_exp_all(f) << f.mbits) | (mall - 1));
}
// The canonical NaN a result is stored as (positive: NaN signs differ between CPUs and GPUs).
ACTORCC_HD uint32_t fmt_nan_code(SmallFloat f) {
  return f.ieee ? ((fmt_exp_all(f) << f.mbits) | (1u << (f.mbits - 1))) : ((fmt_exp_all(f) << f.mbits) | ((1u << f.mbits) - 1));
}

ACTORCC_HD double fmt_decode(uint32_t bits, SmallFloat f) {
  const uint32_t mall = (1u << f.mbits) - 1;
  const uint32_t m = bits & mall, e = (bits >> f.mbits) & fmt_exp_all(f);
  const bool neg = (bits >> (f.ebits + f.mbits)) & 1u;
  double v;
  if (f.ieee && e == fmt_exp_all(f)) {
    v = m ? NAN : INFINITY;
  } else if (!f.ieee && e == fmt_exp_all(f) && m == mall) {
    v = NAN;
  } else if (e == 0) {
    v = m_ldexp(static_cast<double>(m), 1 - fmt_bias(f) - f.mbits);
  } else {
    v = m_ldexp(static_cast<double>((1u << f.mbits) | m), static_cast<int>(e) - fmt_bias(f) - f.mbits);
  }
  return neg ? -v : v;
}

ACTORCC_HD uint32_t fmt_encode(double v, SmallFloat f) {
  if (m_isnan(v)) return fmt_nan_code(f);
  const uint32_t sign = m_signbit(v) ? (1u << (f.ebits + f.mbits)) : 0u;
  const double a = m_signbit(v) ? -v : v;
  if (a == 0) return sign;
  const uint32_t maxc = fmt_max_code(f);
  const double maxv = fmt_decode(maxc, f);
  const uint32_t over = f.satfinite ? maxc : (fmt_exp_all(f) << f.mbits);  // max finite, or inf
  if (a == INFINITY) return sign | over;
  const int emin = 1 - fmt_bias(f);
  int e = m_ilogb(a);
  if (e < emin) e = emin;
  const double q = m_ldexp(1.0, e - f.mbits);  // the format's spacing around a
  const double r = m_rint(a / q) * q;          // a / q is exact; rint rounds half to even
  if (r > maxv) return sign | over;
  if (r == 0) return sign;
  const int er = m_ilogb(r);
  if (er < emin) return sign | static_cast<uint32_t>(m_ldexp(r, f.mbits - emin));  // subnormal
  const uint32_t mant = static_cast<uint32_t>(m_ldexp(r, f.mbits - er)) - (1u << f.mbits);
  return sign | (static_cast<uint32_t>(er + fmt_bias(f)) << f.mbits) | mant;
}

ACTORCC_HD SmallFloat fp8_fmt(int t) { return t == kFloat8e4m3 ? e4m3_fmt() : e5m2_fmt(); }

// ---- the element transforms ---------------------------------------------------------------
// One pass over a buffer: dst[i] = f(src[i]). src and dst may be the same buffer (same width).
enum class XformKind : uint8_t {
  Flip,   // unsigned <-> signed order: the sign bit flipped (4 or 8 bytes; its own inverse)
  Scale,  // x * scalar in the element type (PreMulSum on a type the core reduces)
  Up,     // fp8 -> float64 (optionally times an fp8 scalar) or -> float16 (min/max)
  Down,   // float64 or float16 -> fp8, rounded once, saturating
  UDiv,   // unsigned x / divisor (ncclAvg on an unsigned integer type, after the wrapping sum)
  SDiv,   // signed x / divisor, truncating (ncclAvg on a signed integer type, after the sum)
};
struct Xform {
  XformKind kind = XformKind::Flip;
  int type = kUint32;           // the NCCL type of the call (the narrow side for Up/Down)
  bool wide_f64 = true;         // Up/Down: the wide side is float64 (else float16)
  bool scaled = false;          // Scale, or Up with a PreMulSum scalar
  uint64_t scalar = 0;          // the scalar's bits (host-immediate, or read at run time)
  const void* scalar_ptr = nullptr;  // device-resident scalar: read when the pass runs
  uint64_t divisor = 1;         // UDiv, SDiv
  ACTORCC_HD int src_size() const { return kind == XformKind::Down ? (wide_f64 ? 8 : 2) : nccl_type_size(type); }
  ACTORCC_HD int dst_size() const { return kind == XformKind::Up ? (wide_f64 ? 8 : 2) : nccl_type_size(type); }
};

ACTORCC_HD uint64_t load_bits(const void* p, int size) {
  uint64_t v = 0;
  memcpy(&v, p, static_cast<size_t>(size));  // little-endian: the low bytes
  return v;
}

// x * s on the bits of an IEEE type F (float or double), in F's own precision.
template <typename F, typename Bits>
ACTORCC_HD uint64_t mul_bits(uint64_t x, uint64_t s) {
  const Bits xb = static_cast<Bits>(x), sb = static_cast<Bits>(s);
  F a, b;
  memcpy(&a, &xb, sizeof(F));
  memcpy(&b, &sb, sizeof(F));
  const F c = a * b;
  Bits r;
  memcpy(&r, &c, sizeof(F));
  return r;
}
// x * s on the bits of a small format: the product is exact in double, rounded once.
ACTORCC_HD uint64_t mul_small(uint64_t x, uint64_t s, SmallFloat f) {
  return fmt_encode(fmt_decode(static_cast<uint32_t>(x), f) * fmt_decode(static_cast<uint32_t>(s), f), f);
}

// x * s in the element type `t`: integers wrap (the same bits signed or unsigned); float16 and
// bfloat16 multiply exactly (in double: 11 x 11 bits) and round once, as __hmul does; float32 and
// float64 multiply in their own precision.
ACTORCC_HD uint64_t scale_bits(uint64_t x, uint64_t s, int t) {
  switch (t) {
    case kInt8: case kUint8: return static_cast<uint8_t>(x * s);
    case kInt32: case kUint32: return static_cast<uint32_t>(x * s);
    case kInt64: case kUint64: return x * s;
    case kFloat16: return mul_small(x, s, half_fmt());
    case kBfloat16: return mul_small(x, s, bf16_fmt());
    case kFloat32: return mul_bits<float, uint32_t>(x, s);
    case kFloat64: return mul_bits<double, uint64_t>(x, s);
    default: return 0;
  }
}

// Element i of one pass; `s` is the scalar's bits (already read from scalar_ptr if any).
ACTORCC_HD void xform_one(const Xform& x, uint64_t s, const uint8_t* src, uint8_t* dst, size_t i) {
  const int ss = x.src_size(), ds = x.dst_size();
  const uint64_t in = load_bits(src + i * ss, ss);
  uint64_t out = 0;
  switch (x.kind) {
    case XformKind::Flip: out = in ^ (1ull << (8 * ss - 1)); break;
    case XformKind::Scale: out = scale_bits(in, s, x.type); break;
    case XformKind::UDiv: out = in / x.divisor; break;
    case XformKind::SDiv: {  // sign-extend the wrapped sum from its width, divide, keep the width
      const int shift = 64 - 8 * ss;
      const int64_t v = static_cast<int64_t>(in << shift) >> shift;
      out = static_cast<uint64_t>(v / static_cast<int64_t>(x.divisor));
      break;
    }
    case XformKind::Up: {
      const SmallFloat f = fp8_fmt(x.type);
      double v = fmt_decode(static_cast<uint32_t>(in), f);
      if (x.scaled) v *= fmt_decode(static_cast<uint32_t>(s), f);  // exact: 4 x 4 significant bits
      if (x.wide_f64) memcpy(&out, &v, 8);
      else out = fmt_encode(v, half_fmt());  // exact: float16 holds every fp8 value
      break;
    }
    case XformKind::Down: {
      double v;
      if (x.wide_f64) memcpy(&v, &in, 8);
      else v = fmt_decode(static_cast<uint32_t>(in), half_fmt());
      out = fmt_encode(v, fp8_fmt(x.type));
      break;
    }
  }
  memcpy(dst + i * ds, &out, static_cast<size_t>(ds));
}

}  // namespace actorcc::ncclabi
