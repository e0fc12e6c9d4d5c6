// The CUDA kernels' call check (src/kernels/call_check.hpp), on the CPU: the descriptor hash, the
// flags that carry it and the arbitration of the published call words.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "group/call_desc.hpp"
#include "kernels/call_check.hpp"

using namespace actorcc;
using namespace actorcc::cuda;

namespace {

uint32_t hash_of(const CallDesc& d) {
  uint64_t w[2];
  std::memcpy(w, &d, sizeof w);
  return call_hash(w[0], w[1]);
}

// Descriptors a program could mix: every collective, dtype and op, small and large counts, roots.
std::vector<CallDesc> many_descs() {
  std::vector<CallDesc> v;
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather, Collective::Broadcast,
                       Collective::Reduce, Collective::Barrier})
    for (DataType t : {DataType::Float32, DataType::Float16, DataType::BFloat16, DataType::Int32, DataType::Int8})
      for (RedOp o : {RedOp::Sum, RedOp::Max, RedOp::Min})
        for (size_t n : {size_t(1), size_t(7), size_t(1024), size_t(1025), size_t(4096), size_t(1) << 20,
                         (size_t(1) << 28) + 3})
          for (int root : {0, 1, 3}) {
            float x;
            CallDesc d = CallDesc::of(CollArgs{c, &x, &x, n, t, o, root, nullptr});
            if (std::find(v.begin(), v.end(), d) == v.end()) v.push_back(d);
          }
  return v;
}

}  // namespace

TEST(CallCheck, HashSeparatesDescriptorsAndIsNeverZero) {
  const auto descs = many_descs();
  ASSERT_GT(descs.size(), 500u);
  std::set<uint32_t> full, high;
  for (const CallDesc& d : descs) {
    const uint32_t h = hash_of(d);
    EXPECT_NE(h & 0x80000000u, 0u) << d.text();
    full.insert(h);
    high.insert(h >> 16);
  }
  EXPECT_EQ(full.size(), descs.size());  // no collision among these
  // The LL lines carry only the high 16 bits: collisions at about the birthday rate, no worse.
  EXPECT_GE(high.size() + 20, descs.size());
  // One bit of count changes about half of the hash's bits.
  float x;
  const CollArgs a{Collective::AllReduce, &x, &x, 4096, DataType::Float32, RedOp::Sum, 0, nullptr};
  CollArgs b = a;
  b.count = 4097;
  EXPECT_GE(__builtin_popcount(hash_of(CallDesc::of(a)) ^ hash_of(CallDesc::of(b))), 6);
}

TEST(CallCheck, WordFlagsAcceptTheStepOnlyWithTheCallsHash) {
  const uint32_t h = 0x9234abcdu, other = 0x9235abcdu;
  for (uint64_t v : {uint64_t(1), uint64_t(77), (uint64_t(1) << 31) + 1, (uint64_t(1) << 32) - 1, uint64_t(1) << 32,
                     (uint64_t(5) << 40) + 9}) {
    EXPECT_TRUE(flag_reached(flag_word(v, h), v, h));
    EXPECT_FALSE(flag_reached(flag_word(v, other), v, h)) << "a peer at the same step with another call";
    EXPECT_FALSE(flag_reached(flag_word(v - 1, h), v, h)) << "an earlier step";
    EXPECT_TRUE(flag_reached(flag_word(v + 1, other), v, h)) << "a later step (the peer accepted ours)";
    EXPECT_FALSE(flag_reached(0, v, h)) << "a flag nobody raised";
    EXPECT_FALSE(flag_reached(flag_word(1, other), v + 1, h)) << "a flag left from long ago";
  }
  // The check off (hash 0): the old step-only rule.
  EXPECT_TRUE(flag_reached(flag_word(9, 0), 9, 0));
  EXPECT_TRUE(flag_reached(flag_word(10, 0), 9, 0));
  EXPECT_FALSE(flag_reached(flag_word(8, 0), 9, 0));
}

TEST(CallCheck, LineFlagsRefuseOtherCallsAndStaleLines) {
  std::mt19937_64 rng(20261202);
  const auto descs = many_descs();
  int same_high = 0;
  for (int i = 0; i < 20000; ++i) {
    const uint32_t h = hash_of(descs[rng() % descs.size()]), h0 = hash_of(descs[rng() % descs.size()]);
    const uint64_t s = rng() % (uint64_t(1) << 31);
    // A zeroed slot never matches; the peer's line of the same step matches iff the high halves agree.
    EXPECT_NE(line_flag(s + 1, h), 0u);
    if ((h ^ h0) >> 16) EXPECT_NE(line_flag(s + 1, h), line_flag(s + 1, h0));
    else same_high += h != h0;
    // A stale line (an earlier step of the slot's parity, whatever its call) never matches.
    for (uint64_t back = 2; back <= 64; back += 2)
      if (s >= back) EXPECT_NE(line_flag(s + 1 - back, h0), line_flag(s + 1, h)) << s << " " << back;
  }
  EXPECT_LT(same_high, 200);
  // The check off: the old flag, the low 32 bits of step + 1.
  EXPECT_EQ(line_flag(0x1234567890ull, 0), 0x34567890u);
}

TEST(CallCheck, PublishedCallsDisagreeOnlyAtTheSameCallNumber) {
  const uint32_t h = 0x80001234u, other = 0x8fff0000u;
  EXPECT_TRUE(calls_disagree(call_word(41, h), call_word(41, other)));
  EXPECT_FALSE(calls_disagree(call_word(41, h), call_word(41, h)));
  EXPECT_FALSE(calls_disagree(call_word(41, h), call_word(40, other))) << "the peer is late";
  EXPECT_FALSE(calls_disagree(call_word(41, h), call_word(42, other))) << "our CTA 0 has not published yet";
  EXPECT_FALSE(calls_disagree(0, 0));
  EXPECT_FALSE(calls_disagree(call_word(0, h), 0)) << "a peer that never published";
  // The descriptor next to a word is trusted only once it hashes to the word's hash.
  float x;
  const CallDesc d = CallDesc::of(CollArgs{Collective::Broadcast, &x, &x, 8, DataType::Int32, RedOp::Sum, 1, nullptr});
  uint64_t w[2];
  std::memcpy(w, &d, sizeof w);
  EXPECT_TRUE(desc_matches(call_word(7, call_hash(w[0], w[1])), w[0], w[1]));
  EXPECT_FALSE(desc_matches(call_word(7, call_hash(w[0], w[1])), w[0] + 1, w[1]));
  CallDesc back;
  std::memcpy(&back, w, sizeof back);
  EXPECT_EQ(back.text(), "broadcast(count=8, int32, root=1)");
}
