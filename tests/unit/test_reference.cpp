// The test workers' shared reference (tests/common/reference.hpp) against the library's host
// reduction: if the reference drifted from the documented rounding (fp32 accumulation, one
// rounding, integer wrap, truncating avg), the CPU and GPU tiers would check the wrong thing.
// Also: the Rounding inputs do round in the half types (so half-precision accumulation would
// be caught), and the case table counts what it is given.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/reference.hpp"
#include "common/tally.hpp"
#include "reduce/host_reduce.hpp"

namespace actorcc {
namespace {

constexpr DataType kTypes[] = {DataType::Float32, DataType::Float16, DataType::BFloat16, DataType::Float64,
                               DataType::Int8,    DataType::UInt8,   DataType::Int32,    DataType::Int64};
constexpr RedOp kOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::Avg};

TEST(Reference, HalfAndBFloat16EncodingsMatchTheLibrary) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 200000; ++i) {
    // Exponents across the half range (subnormals included) and beyond bfloat16's need.
    const float f = std::ldexp(static_cast<float>(rng() % (1u << 24)) * (rng() & 1 ? 1 : -1), int(rng() % 40) - 50);
    ASSERT_EQ(testref::half_bits(f), float_to_half(f)) << f;
    ASSERT_EQ(testref::bfloat16_bits(f), float_to_bfloat16(f)) << f;
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<uint16_t>(h);
    if ((b & 0x7c00) == 0x7c00) continue;  // inf / NaN: the workers' inputs never make them
    ASSERT_EQ(testref::half_value(b), half_to_float(b)) << h;
    if ((b & 0x7f80) != 0x7f80) {
      ASSERT_EQ(testref::bfloat16_value(b), bfloat16_to_float(b)) << h;
    }
  }
}

// Both input families, every dtype x op, several worlds: the reference's bytes equal reduce_n's.
TEST(Reference, ReductionMatchesTheHostReduceBitwise) {
  const uint64_t seed = std::random_device{}();
  for (auto family : {testref::Values::Rounding, testref::Values::Exact})
    for (int world : {1, 2, 3, 5, 8})
      for (DataType t : kTypes)
        for (RedOp op : kOps) {
          const size_t count = 1031;
          std::vector<uint64_t> streams(world);
          std::vector<std::vector<uint8_t>> in(world);
          std::vector<const void*> ins(world);
          for (int k = 0; k < world; ++k) {
            streams[k] = testref::stream_of(seed, k, world * 100 + int(t) * 10 + int(op));
            in[k] = testref::input_bytes(family, streams[k], 0, count, t, op, world);
            ins[k] = in[k].data();
          }
          std::vector<uint8_t> got(count * dtype_size(t));
          reduce_n(got.data(), ins.data(), world, count, t, op);
          const auto want = testref::reduced_bytes(family, streams, 0, count, t, op);
          const size_t i = testref::first_difference(got.data(), want.data(), count, t);
          ASSERT_EQ(i, count) << "family " << int(family) << " world " << world << " " << to_string(t) << " "
                              << to_string(op) << ": element " << i << " is " << testref::load(got.data(), i, t)
                              << ", the reference says " << testref::load(want.data(), i, t);
        }
}

// Summing the Rounding inputs in the element type itself (rounding every partial sum) must give
// other bits than the reference for many elements: the check can see half-precision accumulation.
TEST(Reference, RoundingInputsExposeHalfPrecisionAccumulation) {
  for (DataType t : {DataType::Float16, DataType::BFloat16}) {
    const int world = 4;
    const size_t count = 4096;
    std::vector<uint64_t> streams(world);
    for (int k = 0; k < world; ++k) streams[k] = testref::stream_of(7, k, 0);
    const auto want = testref::reduced_bytes(testref::Values::Rounding, streams, 0, count, t, RedOp::Sum);
    size_t differ = 0;
    for (size_t i = 0; i < count; ++i) {
      std::vector<uint8_t> acc(2);
      for (int k = 0; k < world; ++k) {
        const double x = testref::input(testref::Values::Rounding, streams[k], i, t, RedOp::Sum, world);
        testref::store(acc.data(), 0, k ? testref::load(acc.data(), 0, t) + x : x, t);  // rounds each step
      }
      differ += std::memcmp(acc.data(), want.data() + i * 2, 2) != 0;
    }
    EXPECT_GT(differ, count / 20) << to_string(t);
  }
}

TEST(Reference, MisalignmentsAreOneToFifteenElementsAndDiffer) {
  EXPECT_EQ(testref::input_offset(0), 0u);
  EXPECT_EQ(testref::output_offset(0), 0u);
  for (int k = 1; k <= 15; ++k) {
    EXPECT_GE(testref::output_offset(k), 1u);
    EXPECT_LE(testref::output_offset(k), 15u);
    EXPECT_NE(testref::output_offset(k), testref::input_offset(k)) << k;
  }
}

TEST(Tally, CountsCasesAndFailuresByEveryKey) {
  testref::Tally t;
  t.add("all_reduce", DataType::Float16, RedOp::Sum, 4, 100, false);
  t.add("all_reduce", DataType::Float16, RedOp::Sum, 4, 200, true);
  t.add("all_gather", DataType::Int8, "-", 4, 5u << 20, false);
  EXPECT_EQ(t.cases(), 3);
  EXPECT_EQ(t.failures(), 1);
  const std::string table = t.table();
  EXPECT_NE(table.find("all_reduce     float16  sum  4     <=4K  2 1"), std::string::npos) << table;
  EXPECT_NE(table.find("COUNT-BY band       <=64M          1 0"), std::string::npos) << table;
  EXPECT_NE(table.find("COUNT-TOTAL cases 3 failures 1"), std::string::npos) << table;
  EXPECT_NE(t.json().find("\"band\": \"<=64M\", \"cases\": 1, \"failures\": 0"), std::string::npos) << t.json();
}

}  // namespace
}  // namespace actorcc
