// The bench's exact check must catch the bugs it stands guard against. Each case builds an
// output on the host (the library's CPU reduction, independent of the bench's reference), then
// breaks it the way a kernel bug would, and asserts how many elements the check flags.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "host_data.hpp"
#include "reduce/host_reduce.hpp"

namespace actorcc::bench {
namespace {

constexpr DataType kTypes[] = {DataType::Float32, DataType::Float16, DataType::BFloat16, DataType::Float64,
                               DataType::Int8,    DataType::UInt8,   DataType::Int32,    DataType::Int64};
constexpr RedOp kOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::Avg};
constexpr size_t kCount = 4099;  // odd: not a multiple of any vector width

struct Case {
  DataType t;
  RedOp op;
  int world;
  size_t bytes() const { return kCount * dtype_size(t); }
  Pattern pattern(int rank, int coll = kAllReduce, size_t chunk = 0) const {
    return make_pattern(coll, static_cast<int>(op), static_cast<int>(t), world, rank, 0, chunk);
  }
  // Every rank's all-reduce input.
  std::vector<std::vector<char>> inputs() const {
    std::vector<std::vector<char>> in(world, std::vector<char>(bytes()));
    for (int r = 0; r < world; ++r) host::fill(in[r].data(), kCount, t, pattern(r), 0, false);
    return in;
  }
  // reduce_n over ranks [0, n) in rank order.
  std::vector<char> reduce(const std::vector<std::vector<char>>& in, int n) const {
    std::vector<const void*> ptrs;
    for (int r = 0; r < n; ++r) ptrs.push_back(in[r].data());
    std::vector<char> out(bytes());
    reduce_n(out.data(), ptrs.data(), n, kCount, t, op);
    return out;
  }
  size_t wrong(const std::vector<char>& out, int rank = 0) const { return host::check(out.data(), kCount, t, pattern(rank)); }
};

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (int w : {2, 3, 8})
    for (auto t : kTypes)
      for (auto op : kOps) v.push_back({t, op, w});
  return v;
}

std::string name(const Case& c) {
  return std::string(to_string(c.t)) + " " + std::string(to_string(c.op)) + " world " + std::to_string(c.world);
}

TEST(BenchCheck, CorrectAllReducePassesForEveryTypeOpAndWorld) {
  for (const auto& c : all_cases()) {
    auto in = c.inputs();
    for (int r = 0; r < c.world; ++r) EXPECT_EQ(c.wrong(c.reduce(in, c.world), r), 0u) << name(c) << " rank " << r;
  }
}

TEST(BenchCheck, NoCommunicationFails) {  // each rank left with its own input (avg included)
  for (const auto& c : all_cases()) {
    auto in = c.inputs();
    for (int r = 0; r < c.world; ++r) EXPECT_GT(c.wrong(in[r], r), kCount / 3) << name(c) << " rank " << r;
  }
}

TEST(BenchCheck, DroppedRankFails) {  // the last rank's contribution missing
  for (const auto& c : all_cases()) {
    auto in = c.inputs();
    std::vector<char> out = c.reduce(in, c.world - 1);
    if (c.op == RedOp::Avg) {  // the sum of world-1 ranks, divided by world: redo it via Sum
      Case s{c.t, RedOp::Sum, c.world};
      out = s.reduce(in, c.world - 1);
    }
    EXPECT_GT(c.wrong(out), kCount / (4 * c.world)) << name(c);
  }
}

TEST(BenchCheck, TileAtWrongOffsetFails) {  // 1 KiB of the output stored 32 B off (the old period)
  for (const auto& c : all_cases()) {
    auto in = c.inputs();
    auto out = c.reduce(in, c.world);
    const size_t ts = dtype_size(c.t), lo = 1024, n = 1024;
    std::memmove(out.data() + lo + 32, out.data() + lo, n);
    EXPECT_GT(c.wrong(out), n / ts / 3) << name(c);
  }
}

TEST(BenchCheck, HalfPrecisionAccumulationFails) {  // partial sums rounded to the 16-bit type
  struct {
    DataType t;
    RedOp op;
    int world;
  } cases[] = {{DataType::Float16, RedOp::Sum, 3},  {DataType::Float16, RedOp::Sum, 8},
               {DataType::BFloat16, RedOp::Sum, 3}, {DataType::BFloat16, RedOp::Sum, 8},
               {DataType::Float16, RedOp::Avg, 8},  {DataType::BFloat16, RedOp::Prod, 5},
               {DataType::Float16, RedOp::Prod, 8}, {DataType::BFloat16, RedOp::Prod, 8}};
  for (auto [t, op, w] : cases) {
        Case c{t, op, w};
        auto in = c.inputs();
        std::vector<char> acc = in[0];
        const RedOp fold = op == RedOp::Avg ? RedOp::Sum : op;
        for (int r = 1; r < w; ++r) {
          const void* two[2] = {acc.data(), in[r].data()};
          reduce_n(acc.data(), two, 2, kCount, t, fold);  // rounds after every fold
        }
        if (op == RedOp::Avg)  // then divide (in float32, rounded once more)
          for (size_t i = 0; i < kCount; ++i)
            store_from_double(acc.data(), i, static_cast<float>(load_as_double(acc.data(), i, t)) / static_cast<float>(w), t);
        EXPECT_GT(c.wrong(acc), kCount / 20) << name(c);
  }
}

TEST(BenchCheck, NcclInputsStayExactInTheElementType) {  // partial sums rounded in fp16 still pass
  for (auto t : {DataType::Float16, DataType::BFloat16})
    for (RedOp op : {RedOp::Sum, RedOp::Prod})
      for (int w : {3, 8}) {
        Case c{t, op, w};
        std::vector<std::vector<char>> in(w, std::vector<char>(c.bytes()));
        auto pat = [&](int r) { return make_pattern(kAllReduce, static_cast<int>(op), static_cast<int>(t), w, r, 0, 0, true); };
        for (int r = 0; r < w; ++r) host::fill(in[r].data(), kCount, t, pat(r), 0, false);
        std::vector<char> acc = in[0];
        for (int r = 1; r < w; ++r) {
          const void* two[2] = {acc.data(), in[r].data()};
          reduce_n(acc.data(), two, 2, kCount, t, op);
        }
        EXPECT_EQ(host::check(acc.data(), kCount, t, pat(0)), 0u) << name(c);
        EXPECT_GT(host::check(in[0].data(), kCount, t, pat(0)), kCount / 3) << name(c);
      }
}

TEST(BenchCheck, ReduceScatterAndAllGatherSlices) {
  for (int w : {2, 5}) {
    Case c{DataType::Float16, RedOp::Sum, w};
    const size_t chunk = kCount / w;
    auto in = c.inputs();
    auto full = c.reduce(in, w);
    const size_t ts = dtype_size(c.t);
    for (int r = 0; r < w; ++r) {
      Pattern p = c.pattern(r, kReduceScatter, chunk);
      EXPECT_EQ(host::check(full.data() + r * chunk * ts, chunk, c.t, p), 0u);
      EXPECT_GT(host::check(full.data() + ((r + 1) % w) * chunk * ts, chunk, c.t, p), chunk / 2);  // wrong shard
    }
    // all_gather: rank q's input chunk at q * chunk.
    std::vector<char> gathered(chunk * w * ts);
    for (int q = 0; q < w; ++q) host::fill(gathered.data() + q * chunk * ts, chunk, c.t, c.pattern(q), 0, false);
    EXPECT_EQ(host::check(gathered.data(), chunk * w, c.t, c.pattern(0, kAllGather, chunk)), 0u);
    std::swap_ranges(gathered.begin(), gathered.begin() + chunk * ts, gathered.begin() + chunk * ts);
    EXPECT_GT(host::check(gathered.data(), chunk * w, c.t, c.pattern(0, kAllGather, chunk)), chunk);
  }
}

}  // namespace
}  // namespace actorcc::bench
