// The CUDA point-to-point kernel's batch (algorithms/cuda/p2p_batch.cpp): lanes per (direction,
// peer) in issue order, local send/receive pairs as copies, and the batch's limits.
#include <gtest/gtest.h>

#include <vector>

#include "actorcc/error.hpp"
#include "algorithms/cuda/p2p_batch.hpp"

using namespace actorcc;
using cuda::P2PKind;
using K = P2POp::Kind;

namespace {

char buf[64][16];

std::vector<cuda::P2PTask> lane(const cuda::P2PBatch& b, int l) {
  return {b.task + b.lane_begin[l], b.task + b.lane_begin[l + 1]};
}

}  // namespace

TEST(P2PBatch, LanesKeepIssueOrderPerPeerAndDirection) {
  // Rank 1 of 3: two sends to 2 (in this order), a receive from 0, a send to 0, a receive from 2.
  const std::vector<P2POp> ops = {{K::Send, buf[0], 3, DataType::Float32, 2}, {K::Recv, buf[1], 5, DataType::Int8, 0},
                                  {K::Send, buf[2], 7, DataType::Float16, 2}, {K::Send, buf[3], 1, DataType::Int64, 0},
                                  {K::Recv, buf[4], 0, DataType::Float32, 2}};
  const cuda::P2PBatch b = cuda::build_p2p_batch(ops, 1);
  ASSERT_EQ(b.nlanes, 4);
  const auto to0 = lane(b, 0), to2 = lane(b, 1), from0 = lane(b, 2), from2 = lane(b, 3);
  ASSERT_EQ(to0.size(), 1u);
  EXPECT_EQ(to0[0].src, buf[3]);
  EXPECT_EQ(to0[0].nbytes, 8u);
  ASSERT_EQ(to2.size(), 2u);
  EXPECT_EQ(to2[0].src, buf[0]);
  EXPECT_EQ(to2[1].src, buf[2]);
  EXPECT_EQ(to2[1].nbytes, 14u);
  EXPECT_EQ(to2[1].header, cuda::p2p_header(14, DataType::Float16));
  for (const auto& t : to2) EXPECT_EQ(t.kind, static_cast<int>(P2PKind::Send));
  ASSERT_EQ(from0.size(), 1u);
  EXPECT_EQ(from0[0].dst, buf[1]);
  EXPECT_EQ(from0[0].kind, static_cast<int>(P2PKind::Recv));
  EXPECT_EQ(from0[0].peer, 0);
  ASSERT_EQ(from2.size(), 1u);
  EXPECT_EQ(from2[0].nbytes, 0u);  // an empty transfer still travels (its header is checked)
  EXPECT_EQ(b.lane_begin[b.nlanes], 5);
}

TEST(P2PBatch, HeadersTellSizeAndTypeApart) {
  // Same bytes, another dtype: the two ends disagree, which the kernel must see.
  EXPECT_NE(cuda::p2p_header(8, DataType::Float32), cuda::p2p_header(8, DataType::Int64));
  EXPECT_NE(cuda::p2p_header(8, DataType::Float32), cuda::p2p_header(12, DataType::Float32));
}

TEST(P2PBatch, LocalPairsBecomeCopiesInOrder) {
  const std::vector<P2POp> ops = {{K::Send, buf[0], 4, DataType::Int32, 0}, {K::Send, buf[1], 2, DataType::Int32, 0},
                                  {K::Recv, buf[2], 4, DataType::Int32, 0}, {K::Recv, buf[3], 2, DataType::Int32, 0}};
  const cuda::P2PBatch b = cuda::build_p2p_batch(ops, 0);
  ASSERT_EQ(b.nlanes, 1);
  const auto copies = lane(b, 0);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].kind, static_cast<int>(P2PKind::Copy));
  EXPECT_EQ(copies[0].src, buf[0]);
  EXPECT_EQ(copies[0].dst, buf[2]);
  EXPECT_EQ(copies[1].src, buf[1]);
  EXPECT_EQ(copies[1].dst, buf[3]);
  EXPECT_EQ(copies[1].nbytes, 8u);
}

TEST(P2PBatch, RefusesWhatTheKernelCannotCarry) {
  const std::vector<P2POp> unequal = {{K::Send, buf[0], 4, DataType::Int32, 3}, {K::Recv, buf[1], 5, DataType::Int32, 3}};
  try {
    cuda::build_p2p_batch(unequal, 3);
    FAIL() << "a local send and receive of different sizes passed";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos) << e.what();
  }
  const std::vector<P2POp> unpaired = {{K::Send, buf[0], 4, DataType::Int32, 0}};
  EXPECT_THROW(cuda::build_p2p_batch(unpaired, 0), InvalidArgument);
  std::vector<P2POp> many(cuda::kMaxP2PTasks + 1, {K::Send, buf[0], 1, DataType::Int8, 1});
  EXPECT_THROW(cuda::build_p2p_batch(many, 0), InvalidArgument);
  many.pop_back();
  EXPECT_EQ(cuda::build_p2p_batch(many, 0).lane_begin[1], cuda::kMaxP2PTasks);
}
