// The transfer summaries the NCCL path swaps in checked mode (algorithms/p2p_check.cpp): equal
// for matching ends, different for every kind of disagreement, seen from both ends.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/p2p_check.hpp"

using namespace actorcc;
using K = P2POp::Kind;

namespace {

char b[8];

// What ranks 0 and 1 compare for each other.
std::string verdict(const std::vector<P2POp>& r0, const std::vector<P2POp>& r1, int who) {
  const auto s0 = summarize_transfers(r0, 2), s1 = summarize_transfers(r1, 2);
  return who == 0 ? transfer_disagreement(s0[1], s1[0], 0, 1) : transfer_disagreement(s1[0], s0[1], 1, 0);
}

}  // namespace

TEST(P2PCheck, MatchingEndsAgree) {
  const std::vector<P2POp> r0 = {{K::Send, b, 4, DataType::Float32, 1}, {K::Recv, b, 9, DataType::Int8, 1},
                                 {K::Send, b, 8, DataType::Float16, 1}};
  const std::vector<P2POp> r1 = {{K::Recv, b, 4, DataType::Float32, 0}, {K::Send, b, 9, DataType::Int8, 0},
                                 {K::Recv, b, 8, DataType::Float16, 0}};
  EXPECT_EQ(verdict(r0, r1, 0), "");
  EXPECT_EQ(verdict(r0, r1, 1), "");
  EXPECT_EQ(transfer_peers(summarize_transfers(r0, 3), 0), std::vector<int>{1});
}

TEST(P2PCheck, EveryDisagreementIsSeenFromBothEnds) {
  const std::vector<P2POp> send4 = {{K::Send, b, 4, DataType::Float32, 1}};
  const std::vector<std::vector<P2POp>> wrong_recv = {
      {{K::Recv, b, 5, DataType::Float32, 0}},                                           // count
      {{K::Recv, b, 4, DataType::Int32, 0}},                                             // dtype, same bytes
      {},                                                                                // missing
      {{K::Recv, b, 4, DataType::Float32, 0}, {K::Recv, b, 1, DataType::Float32, 0}},   // one too many
  };
  for (const auto& r1 : wrong_recv) {
    const std::string at0 = verdict(send4, r1, 0), at1 = verdict(send4, r1, 1);
    EXPECT_NE(at0, "");
    EXPECT_NE(at1, "");
    for (const std::string& e : {at0, at1}) {
      EXPECT_NE(e.find("rank 0"), std::string::npos) << e;
      EXPECT_NE(e.find("rank 1"), std::string::npos) << e;
    }
  }
  // The same transfers in another order differ too (the k-th send meets the k-th receive).
  const std::vector<P2POp> a = {{K::Send, b, 4, DataType::Float32, 1}, {K::Send, b, 8, DataType::Float32, 1}};
  const std::vector<P2POp> z = {{K::Recv, b, 8, DataType::Float32, 0}, {K::Recv, b, 4, DataType::Float32, 0}};
  EXPECT_NE(verdict(a, z, 1), "");
}
