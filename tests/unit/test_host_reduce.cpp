// Host reduction math: half/bfloat16 conversions (exhaustive round trips, RNE edges) and
// reduce_n for every dtype x op against a float64 (or exact 64-bit integer) reference.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "reduce/host_reduce.hpp"

namespace actorcc {
namespace {

// Exact value of a half bit pattern, computed independently of the library.
double half_value(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 0x1f) return m ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

TEST(HalfConversion, EveryBitPatternWidensExactlyAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = half_to_float(bits);
    const double ref = half_value(bits);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      const uint16_t back = float_to_half(f);
      ASSERT_EQ(back & 0x7c00, 0x7c00) << std::hex << h;
      ASSERT_NE(back & 0x3ff, 0) << std::hex << h;                // still NaN
      ASSERT_EQ(back & 0x8000, bits & 0x8000) << std::hex << h;  // sign kept
      if (bits & 0x200) ASSERT_EQ(back, bits) << std::hex << h;   // quiet NaNs come back unchanged
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), ref) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (bits & 0x8000) != 0) << std::hex << h;
    ASSERT_EQ(float_to_half(f), bits) << std::hex << h;
  }
}

TEST(BFloat16Conversion, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float f = bfloat16_to_float(bits);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), static_cast<uint32_t>(bits) << 16);
    const uint16_t back = float_to_bfloat16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bfloat16_to_float(back))) << std::hex << b;
      ASSERT_EQ(back & 0x8000, bits & 0x8000);
      ASSERT_EQ(back | 0x40, bits | 0x40) << std::hex << b;  // only the quiet bit may change
    } else {
      ASSERT_EQ(back, bits) << std::hex << b;
    }
  }
}

// Reference rounding to half: pick the nearest representable value, ties to the even pattern.
uint16_t half_rne_reference(float f) {
  if (std::isnan(f)) return 0x7e00;
  const double v = f;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(v);
  // Largest finite half 65504; values >= 65520 (midpoint to 2^16) round to inf.
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0;
  for (uint16_t step = 0x4000; step; step >>= 1)  // binary search the last pattern <= a
    if (lo + step <= 0x7bff && half_value(static_cast<uint16_t>(lo + step)) <= a) lo = static_cast<uint16_t>(lo + step);
  if (lo == 0x7bff) return sign | lo;
  const double dl = a - half_value(lo), dh = half_value(static_cast<uint16_t>(lo + 1)) - a;
  if (dl < dh) return sign | lo;
  if (dh < dl) return sign | static_cast<uint16_t>(lo + 1);
  return sign | ((lo & 1) ? static_cast<uint16_t>(lo + 1) : lo);
}

TEST(HalfConversion, RoundsToNearestEvenEverywhere) {
  // Every midpoint between adjacent finite halves (exact in float) and its neighbours.
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const double mid = (half_value(static_cast<uint16_t>(h)) + half_value(static_cast<uint16_t>(h + 1))) / 2;
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid);
    for (float f : {m, std::nextafter(m, 0.0f), std::nextafter(m, 1e9f)}) {
      ASSERT_EQ(float_to_half(f), half_rne_reference(f)) << f;
      ASSERT_EQ(float_to_half(-f), half_rne_reference(-f)) << -f;
    }
  }
  std::mt19937 rng(12345);
  for (int i = 0; i < 200000; ++i) {
    float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), half_rne_reference(f)) << f;
  }
}

TEST(HalfConversion, Edges) {
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even (down)
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // midpoint to 2^16 rounds to inf
  EXPECT_EQ(float_to_half(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);       // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);       // tie -> even zero
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);       // tie -> even 2
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);       // smallest normal
  EXPECT_EQ(float_to_half(std::ldexp(1023.5f, -24)), 0x0400);    // subnormal rounding into normal
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  const uint16_t nan = float_to_half(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x3ff, 0);
}

TEST(BFloat16Conversion, Edges) {
  EXPECT_EQ(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie -> even
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie -> even
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(float_to_bfloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x00018000u)), 0x0002);  // subnormal tie -> even
  const uint16_t nan = float_to_bfloat16(std::bit_cast<float>(0x7f800001u));  // signalling, low payload
  EXPECT_TRUE(std::isnan(bfloat16_to_float(nan)));
}

// ---------------------------------------------------------------------------------------
// reduce_n against references.

bool is_float(DataType t) {
  return t == DataType::Float32 || t == DataType::Float16 || t == DataType::BFloat16 || t == DataType::Float64;
}
bool is_half(DataType t) { return t == DataType::Float16 || t == DataType::BFloat16; }

// Stores the low bytes of an exact 64-bit value: the integer wrap into the dtype
// (little-endian, like every host this runs on).
void store_wrapped(void* buf, size_t i, uint64_t v, DataType t) {
  const size_t es = dtype_size(t);
  std::memcpy(static_cast<uint8_t*>(buf) + i * es, &v, es);
}

// Integer inputs are exact int64 values; keep them alongside for the exact reference.
struct Inputs {
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<const void*> ptrs;
};

Inputs make_inputs(DataType t, RedOp op, int n, size_t count, std::mt19937& rng) {
  Inputs in;
  const size_t es = dtype_size(t);
  in.bufs.assign(n, std::vector<uint8_t>(count * es));
  for (int k = 0; k < n; ++k) {
    for (size_t i = 0; i < count; ++i) {
      double v;
      if (op == RedOp::Prod && is_float(t)) {
        const double choices[] = {-2, -1, -0.5, 0.5, 1, 2};
        v = choices[rng() % 6];
      } else if (is_float(t)) {
        v = static_cast<int>(rng() % 33) - 16;  // sums stay exact even in bfloat16 (8 bits)
        if (op == RedOp::Min || op == RedOp::Max) v = std::ldexp(static_cast<double>(static_cast<int>(rng() % 2001) - 1000), -3);
      } else if (t == DataType::UInt8) {
        v = rng() % 256;
      } else if (t == DataType::Int8) {
        v = static_cast<int>(rng() % 256) - 128;
      } else if (t == DataType::Int32) {
        v = static_cast<int32_t>(rng());
      } else {
        v = static_cast<double>(static_cast<int64_t>(rng() % 2000001) - 1000000);
      }
      store_from_double(in.bufs[k].data(), i, v, t);
    }
  }
  for (auto& b : in.bufs) in.ptrs.push_back(b.data());
  return in;
}

// Stores expected element i into `expect` (exact 64-bit integer arithmetic for integer types,
// float64 otherwise).
void reference(const Inputs& in, size_t i, DataType t, RedOp op, void* expect) {
  const int n = static_cast<int>(in.ptrs.size());
  if (!is_float(t)) {
    // Exact arithmetic in 64 bits, wrapping like the library.
    uint64_t acc = static_cast<uint64_t>(static_cast<int64_t>(load_as_double(in.ptrs[0], i, t)));
    if (t == DataType::Int64) acc = static_cast<uint64_t>(static_cast<const int64_t*>(in.ptrs[0])[i]);
    auto get = [&](int k) -> int64_t {
      if (t == DataType::Int64) return static_cast<const int64_t*>(in.ptrs[k])[i];
      return static_cast<int64_t>(load_as_double(in.ptrs[k], i, t));
    };
    int64_t mn = get(0), mx = get(0);
    for (int k = 1; k < n; ++k) {
      const int64_t x = get(k);
      if (op == RedOp::Prod) acc *= static_cast<uint64_t>(x);
      else acc += static_cast<uint64_t>(x);
      mn = std::min(mn, x);
      mx = std::max(mx, x);
    }
    switch (op) {
      case RedOp::Sum:
      case RedOp::Prod: return store_wrapped(expect, i, acc, t);
      case RedOp::Min: return store_wrapped(expect, i, static_cast<uint64_t>(mn), t);
      case RedOp::Max: return store_wrapped(expect, i, static_cast<uint64_t>(mx), t);
      case RedOp::Avg:  // sums are exact here
        return store_wrapped(expect, i, static_cast<uint64_t>(static_cast<int64_t>(acc) / n), t);
    }
  }
  double acc = load_as_double(in.ptrs[0], i, t), mn = acc, mx = acc;
  for (int k = 1; k < n; ++k) {
    const double x = load_as_double(in.ptrs[k], i, t);
    if (op == RedOp::Prod) acc *= x; else acc += x;
    mn = std::min(mn, x);
    mx = std::max(mx, x);
  }
  double r = acc;  // sum and prod are exact by construction of the inputs
  if (op == RedOp::Min) r = mn;
  if (op == RedOp::Max) r = mx;
  // Avg: the exact sum divided once, in float32 for float32 and the half types.
  if (op == RedOp::Avg) r = t == DataType::Float64 ? acc / n : static_cast<float>(acc) / static_cast<float>(n);
  store_from_double(expect, i, r, t);
}

class ReduceMatrix : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ReduceMatrix, MatchesReference) {
  const auto t = static_cast<DataType>(std::get<0>(GetParam()));
  const auto op = static_cast<RedOp>(std::get<1>(GetParam()));
  const size_t es = dtype_size(t);
  std::mt19937 rng(1000 + 10 * static_cast<int>(t) + static_cast<int>(op));
  for (int n : {1, 2, 3, 5, 8}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{512}, size_t{1037}, size_t{4097}}) {
      Inputs in = make_inputs(t, op, n, count, rng);
      std::vector<uint8_t> out(count * es + 1, 0xAB);
      reduce_n(out.data(), in.ptrs.data(), n, count, t, op);
      std::vector<uint8_t> expect(count * es);
      for (size_t i = 0; i < count; ++i) reference(in, i, t, op, expect.data());
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(0, std::memcmp(out.data() + i * es, expect.data() + i * es, es))
            << to_string(t) << " " << to_string(op) << " n=" << n << " count=" << count << " i=" << i
            << " got " << load_as_double(out.data(), i, t) << " want " << load_as_double(expect.data(), i, t);
      ASSERT_EQ(out[count * es], 0xAB) << "wrote past the end";

      // In place: the output aliases an input (here the last one, read after others).
      if (count > 0 && n > 1) {
        std::vector<uint8_t> alias = in.bufs[n - 1];
        std::vector<const void*> ptrs = in.ptrs;
        ptrs[n - 1] = alias.data();
        reduce_n(alias.data(), ptrs.data(), n, count, t, op);
        ASSERT_EQ(0, std::memcmp(alias.data(), out.data(), count * es)) << "in-place differs";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypesOps, ReduceMatrix,
                         ::testing::Combine(::testing::Range(0, kNumDataTypes), ::testing::Range(0, kNumRedOps)),
                         [](const auto& info) {
                           return std::string(to_string(static_cast<DataType>(std::get<0>(info.param)))) + "_" +
                                  std::string(to_string(static_cast<RedOp>(std::get<1>(info.param))));
                         });

// reduce_n converts float16 blocks in bulk (F16C where the CPU has it); it must agree bit for
// bit with the scalar conversions for every pattern, NaNs and subnormals included.
TEST(ReduceHalf, BulkConversionMatchesScalarForEveryPattern) {
  std::vector<uint16_t> all(65536), zeros(65536, 0), out(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  const void* one[] = {all.data()};
  reduce_n(out.data(), one, 1, all.size(), DataType::Float16, RedOp::Max);  // pure widen + narrow
  for (uint32_t i = 0; i < 65536; ++i)
    ASSERT_EQ(out[i], float_to_half(half_to_float(all[i]))) << std::hex << i;
  const void* two[] = {all.data(), zeros.data()};
  reduce_n(out.data(), two, 2, all.size(), DataType::Float16, RedOp::Sum);  // x + 0 in float32
  for (uint32_t i = 0; i < 65536; ++i)
    ASSERT_EQ(out[i], float_to_half(half_to_float(all[i]) + 0.0f)) << std::hex << i;
  reduce_n(out.data(), two, 2, all.size(), DataType::Float16, RedOp::Avg);  // (x + 0) / 2, subnormal results
  for (uint32_t i = 0; i < 65536; ++i)
    ASSERT_EQ(out[i], float_to_half((half_to_float(all[i]) + 0.0f) / 2.0f)) << std::hex << i;
}

uint16_t h(float f) { return float_to_half(f); }

TEST(ReduceHalf, RoundsOnceOverAllInputs) {
  // Pairwise half rounding would give 2048 + 1 -> 2048 (tie to even), + 1 -> 2048 again;
  // reducing in float and rounding once gives 2050 (exact in half).
  uint16_t a[] = {h(2048)}, b[] = {h(1)}, c[] = {h(1)};
  const void* ins[] = {a, b, c};
  uint16_t out = 0;
  reduce_n(&out, ins, 3, 1, DataType::Float16, RedOp::Sum);
  EXPECT_EQ(half_to_float(out), 2050.0f);
}

TEST(ReduceHalf, OverflowAndSubnormals) {
  uint16_t a[] = {h(60000), 0x0001, h(-60000)}, b[] = {h(60000), 0x0001, h(-60000)};
  const void* ins[] = {a, b};
  uint16_t out[3];
  reduce_n(out, ins, 2, 3, DataType::Float16, RedOp::Sum);
  EXPECT_EQ(out[0], 0x7c00);
  EXPECT_EQ(out[1], 0x0002);
  EXPECT_EQ(out[2], 0xfc00);
  // Avg of the two overflowing halves: the float32 sum does not overflow, so the mean is exact.
  reduce_n(out, ins, 2, 3, DataType::Float16, RedOp::Avg);
  EXPECT_EQ(half_to_float(out[0]), half_to_float(h(60000)));
  EXPECT_EQ(out[1], 0x0001);
}

TEST(ReduceNaN, MinMaxPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (DataType t : {DataType::Float32, DataType::Float64, DataType::Float16, DataType::BFloat16}) {
    for (RedOp op : {RedOp::Min, RedOp::Max, RedOp::Sum}) {
      // NaN first, in the middle, last; and no NaN at all.
      const double cols[4][3] = {{nan, 1, 2}, {1, nan, 2}, {1, 2, nan}, {3, -1, 2}};
      std::vector<std::vector<uint8_t>> bufs(3, std::vector<uint8_t>(4 * dtype_size(t)));
      for (int k = 0; k < 3; ++k)
        for (int i = 0; i < 4; ++i) store_from_double(bufs[k].data(), i, cols[i][k], t);
      const void* ins[] = {bufs[0].data(), bufs[1].data(), bufs[2].data()};
      std::vector<uint8_t> out(4 * dtype_size(t));
      reduce_n(out.data(), ins, 3, 4, t, op);
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(load_as_double(out.data(), i, t))) << to_string(t) << i;
      const double want = op == RedOp::Min ? -1 : op == RedOp::Max ? 3 : 4;
      EXPECT_EQ(load_as_double(out.data(), 3, t), want);
    }
  }
}

TEST(ReduceInt, WrapsAndTruncates) {
  int8_t a[] = {100, -128, -7}, b[] = {100, -1, 2};
  const void* ins[] = {a, b};
  int8_t out[3];
  reduce_n(out, ins, 2, 3, DataType::Int8, RedOp::Sum);
  EXPECT_EQ(out[0], static_cast<int8_t>(-56));
  EXPECT_EQ(out[1], 127);
  reduce_n(out, ins, 2, 3, DataType::Int8, RedOp::Avg);  // exact sum, truncation toward zero
  EXPECT_EQ(out[0], 100);
  EXPECT_EQ(out[1], -64);
  EXPECT_EQ(out[2], -2);
  int64_t x[] = {std::numeric_limits<int64_t>::max()}, y[] = {2};
  const void* ins64[] = {x, y};
  int64_t o64;
  reduce_n(&o64, ins64, 2, 1, DataType::Int64, RedOp::Prod);
  EXPECT_EQ(o64, -2);
}

}  // namespace
}  // namespace actorcc
