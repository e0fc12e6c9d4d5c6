// The adapter's element maths (nccl/src/adapt_math.hpp) against the formats' definitions:
// every one of the 256 encodings of e4m3 and e5m2 (decode, round trip), rounding at every
// midpoint and just beside it, saturation of everything beyond the largest finite value (NCCL's
// __NV_SATFINITE), and, where the CUDA toolkit is present, bit-equality with cuda_fp8.h's own
// conversion; float16 and bfloat16 against the tests' reference encodings; the NCCL enum values
// against the toolkit's nccl.h.
#include <gtest/gtest.h>

#include <random>

#include "adapt_state.hpp"
#include "nccl/adapt_matrix.hpp"

#if defined(ACTORCC_WITH_CUDA) && __has_include(<cuda_fp8.h>)
#include <cuda_fp8.h>
#define HAVE_CUDA_FP8 1
#endif
#if defined(ACTORCC_HAVE_NCCL_H)
#include <nccl.h>
#endif

namespace actorcc::ncclabi {
namespace {
namespace tt = testing;

SmallFloat fmt_of(int t) { return t == tt::E4m3 ? e4m3_fmt() : e5m2_fmt(); }

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b)); }

TEST(NcclAdaptFp8, DecodesEveryEncoding) {
  for (int t : {tt::E4m3, tt::E5m2})
    for (int b = 0; b < 256; ++b)
      EXPECT_TRUE(same(fmt_decode(b, fmt_of(t)), tt::fp8_value(t, b))) << tt::kTypeName[t] << " 0x" << std::hex << b;
  EXPECT_EQ(tt::fp8_value(tt::E4m3, 0x7E), 448);
  EXPECT_EQ(tt::fp8_value(tt::E5m2, 0x7B), 57344);
  EXPECT_EQ(tt::fp8_value(tt::E4m3, 0x01), std::ldexp(1, -9));
  EXPECT_EQ(tt::fp8_value(tt::E5m2, 0x01), std::ldexp(1, -16));
}

TEST(NcclAdaptFp8, RoundTripsEveryEncoding) {
  for (int t : {tt::E4m3, tt::E5m2})
    for (int b = 0; b < 256; ++b) {
      const double v = tt::fp8_value(t, b);
      uint32_t want = b;
      if (std::isnan(v)) want = t == tt::E4m3 ? 0x7F : 0x7E;      // the canonical NaN
      else if (std::isinf(v)) want = (b & 0x80) | 0x7B;           // e5m2 inf saturates
      EXPECT_EQ(fmt_encode(v, fmt_of(t)), want) << tt::kTypeName[t] << " 0x" << std::hex << b;
    }
}

// Between every two neighbouring finite values of one sign: the midpoint goes to the even code,
// a hair either side to the nearer one; beyond the largest value everything saturates.
TEST(NcclAdaptFp8, RoundsToNearestEvenAndSaturates) {
  for (int t : {tt::E4m3, tt::E5m2}) {
    const SmallFloat f = fmt_of(t);
    for (int sign : {0, 0x80}) {
      const uint8_t maxc = static_cast<uint8_t>(sign | (t == tt::E4m3 ? 0x7E : 0x7B));
      for (int b = sign; b < maxc; ++b) {
        const double lo = tt::fp8_value(t, b), hi = tt::fp8_value(t, b + 1);
        const double mid = (lo + hi) / 2, eps = std::fabs(hi - lo) / 1024;
        const uint32_t even = (b & 1) ? b + 1 : b;
        EXPECT_EQ(fmt_encode(mid, f), even) << tt::kTypeName[t] << " midpoint of 0x" << std::hex << b;
        EXPECT_EQ(fmt_encode(mid, f), tt::fp8_code(t, mid));
        const double toward_lo = sign ? mid + eps : mid - eps, toward_hi = sign ? mid - eps : mid + eps;
        EXPECT_EQ(fmt_encode(toward_lo, f), static_cast<uint32_t>(b)) << tt::kTypeName[t] << " below 0x" << std::hex << b;
        EXPECT_EQ(fmt_encode(toward_hi, f), static_cast<uint32_t>(b + 1)) << tt::kTypeName[t] << " above 0x" << std::hex << b;
      }
      const double maxv = std::fabs(tt::fp8_value(t, maxc));
      for (double over : {maxv * 1.0001, maxv * 1.2, maxv * 2, 1e30, HUGE_VAL})
        EXPECT_EQ(fmt_encode(sign ? -over : over, f), maxc) << tt::kTypeName[t] << " " << over;
    }
    // Below half the smallest subnormal: zero of the value's sign; exactly half: the even zero.
    const double tiny = tt::fp8_value(t, 1);
    EXPECT_EQ(fmt_encode(tiny / 2, f), 0u);
    EXPECT_EQ(fmt_encode(-tiny / 2, f), 0x80u);
    EXPECT_EQ(fmt_encode(tiny * 0.5000001, f), 1u);
    EXPECT_EQ(fmt_encode(tiny / 4, f), 0u);
  }
}

// Random doubles over the formats' whole range (and beyond) against the definition's search.
TEST(NcclAdaptFp8, MatchesTheDefinitionOnRandomValues) {
  std::mt19937_64 rng(std::random_device{}());
  for (int t : {tt::E4m3, tt::E5m2})
    for (int i = 0; i < 20000; ++i) {
      const double v = std::ldexp(static_cast<double>(rng() >> 11) / 9007199254740992.0, static_cast<int>(rng() % 50) - 25) *
                       ((rng() & 1) ? -1 : 1);
      ASSERT_EQ(fmt_encode(v, fmt_of(t)), tt::fp8_code(t, v)) << tt::kTypeName[t] << " " << v;
    }
}

#if defined(HAVE_CUDA_FP8)
// The toolkit's own conversion with __NV_SATFINITE (what NCCL's fp8 reductions store with) gives
// the same bits for every non-NaN value (cuda_fp8.h keeps a NaN's sign and payload; the adapter
// stores the canonical positive NaN).
TEST(NcclAdaptFp8, MatchesCudaSatfiniteConversion) {
  std::mt19937_64 rng(std::random_device{}());
  for (int t : {tt::E4m3, tt::E5m2}) {
    const __nv_fp8_interpretation_t in = t == tt::E4m3 ? __NV_E4M3 : __NV_E5M2;
    std::vector<double> vs;
    for (int b = 0; b < 255; ++b) {
      const double lo = tt::fp8_value(t, b), hi = tt::fp8_value(t, b + 1);
      if (std::isfinite(lo) && std::isfinite(hi)) vs.insert(vs.end(), {lo, (lo + hi) / 2, std::nextafter((lo + hi) / 2, 0.0)});
    }
    for (int i = 0; i < 20000; ++i)
      vs.push_back(std::ldexp(static_cast<double>(rng() >> 11) / 9007199254740992.0, static_cast<int>(rng() % 50) - 25) *
                   ((rng() & 1) ? -1 : 1));
    vs.insert(vs.end(), {HUGE_VAL, -HUGE_VAL, 1e300, -1e300, 0.0, -0.0});
    for (double v : vs)
      ASSERT_EQ(fmt_encode(v, fmt_of(t)), static_cast<uint32_t>(__nv_cvt_double_to_fp8(v, __NV_SATFINITE, in)))
          << tt::kTypeName[t] << " " << v;
  }
}
#endif

TEST(NcclAdaptFp8, HalfAndBfloat16MatchTheReference) {
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_TRUE(same(fmt_decode(h, half_fmt()), testref::half_value(static_cast<uint16_t>(h)))) << std::hex << h;
    ASSERT_TRUE(same(fmt_decode(h, bf16_fmt()), testref::bfloat16_value(static_cast<uint16_t>(h)))) << std::hex << h;
    const double v = testref::half_value(static_cast<uint16_t>(h));
    if (!std::isnan(v)) ASSERT_EQ(fmt_encode(v, half_fmt()), h) << std::hex << h;
  }
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 20000; ++i) {
    const double v = std::ldexp(static_cast<double>(rng() >> 11) / 9007199254740992.0, static_cast<int>(rng() % 40) - 20);
    ASSERT_EQ(fmt_encode(v, half_fmt()), testref::half_bits(v)) << v;
    ASSERT_EQ(fmt_encode(v, bf16_fmt()), testref::bfloat16_bits(v)) << v;
  }
  EXPECT_EQ(fmt_encode(65520.0, half_fmt()), 0x7c00u);  // non-saturating: rounds to inf
  EXPECT_EQ(fmt_encode(NAN, half_fmt()), 0x7e00u);
}

TEST(NcclAdaptFp8, ElementPasses) {
  // Flip maps unsigned order onto signed order and back.
  Xform flip;
  flip.kind = XformKind::Flip;
  flip.type = kUint32;
  const uint32_t in[3] = {0, 0x80000000u, 0xffffffffu};
  uint32_t out[3];
  host_xform(flip, in, out, 3);
  EXPECT_LT(static_cast<int32_t>(out[0]), static_cast<int32_t>(out[1]));
  EXPECT_LT(static_cast<int32_t>(out[1]), static_cast<int32_t>(out[2]));
  host_xform(flip, out, out, 3);
  EXPECT_EQ(std::memcmp(in, out, sizeof in), 0);
  // Unsigned divide after the sum (NCCL's ncclAvg on integers).
  Xform div;
  div.kind = XformKind::UDiv;
  div.type = kUint64;
  div.divisor = 3;
  const uint64_t big[1] = {0xffffffffffffffffull};
  uint64_t q[1];
  host_xform(div, big, q, 1);
  EXPECT_EQ(q[0], 0xffffffffffffffffull / 3);
}

#if defined(ACTORCC_HAVE_NCCL_H)
static_assert(+ncclInt8 == +kInt8 && +ncclUint8 == +kUint8 && +ncclInt32 == +kInt32 && +ncclUint32 == +kUint32 &&
              +ncclInt64 == +kInt64 && +ncclUint64 == +kUint64 && +ncclFloat16 == +kFloat16 && +ncclFloat32 == +kFloat32 &&
              +ncclFloat64 == +kFloat64 && +ncclBfloat16 == +kBfloat16 && +ncclNumTypes == +kNumTypes);
#if NCCL_VERSION_CODE >= 22400
static_assert(+ncclFloat8e4m3 == +kFloat8e4m3 && +ncclFloat8e5m2 == +kFloat8e5m2);
#endif
static_assert(+ncclSum == +kSum && +ncclProd == +kProd && +ncclMax == +kMax && +ncclMin == +kMin && +ncclAvg == +kAvg &&
              +ncclNumOps == +kNumOps && +ncclScalarDevice == +0 && +ncclScalarHostImmediate == +1);
#endif

}  // namespace
}  // namespace actorcc::ncclabi
