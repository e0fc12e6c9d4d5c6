// The elastic state's pure parts (core/elastic.hpp): the successor record in the peer blobs,
// the survivor-list digest, shrink's plan and its checks, and grow's agreement inputs.
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "bootstrap/id_fields.hpp"
#include "common/abort_signal.hpp"
#include "core/elastic.hpp"

namespace actorcc {
namespace {

UniqueId loopback_id() {
  bootstrap::IdFields f;
  f.root = *net::resolve("127.0.0.1", 1234);
  f.token = bootstrap::random_token();
  return bootstrap::make_id(f);
}

// Every rank's blobs as a group of `world` would see them, each rank with `digest`.
std::vector<std::unique_ptr<elastic::Member>> group(int world, std::vector<uint64_t> digests,
                                                    std::vector<std::string>* blobs) {
  const UniqueId id = loopback_id();
  std::vector<std::unique_ptr<elastic::Member>> ms;
  for (int r = 0; r < world; ++r) {
    ms.push_back(elastic::Member::reserve(id, digests[r]));
    blobs->push_back(ms.back()->wrap("topology of rank " + std::to_string(r) + std::string("\0\1\2", 3)));
  }
  return ms;
}

TEST(ElasticMember, BlobsRoundTripAndEveryRankLearnsEverySuccessor) {
  std::vector<std::string> blobs;
  auto ms = group(3, {0, 0, 0}, &blobs);
  for (int r = 0; r < 3; ++r) {
    auto topo = ms[r]->unwrap_all(blobs, r);
    ASSERT_EQ(topo.size(), 3u);
    for (int q = 0; q < 3; ++q) {
      EXPECT_EQ(topo[q], "topology of rank " + std::to_string(q) + std::string("\0\1\2", 3));
      EXPECT_EQ(ms[r]->successors()[q].port, ms[q]->mine().port);
      EXPECT_EQ(ms[r]->successors()[q].ip, "127.0.0.1");
      EXPECT_EQ(ms[r]->successors()[q].token, ms[q]->mine().token);
    }
  }
  EXPECT_NE(ms[0]->mine().token, ms[1]->mine().token);  // fresh per rank
  EXPECT_NE(ms[0]->mine().port, 0);
}

// A grown group's root lives in the member that called grow_id(); the peer blobs say
// which rank that is, so its loss names it (culprit -1 before).
TEST(ElasticMember, TheRankHostingTheRootIsKnownToEveryRank) {
  const UniqueId here = UniqueId::create("127.0.0.1");  // its root runs in this process
  const UniqueId elsewhere = loopback_id();             // nobody here serves it
  std::vector<std::unique_ptr<elastic::Member>> ms;
  std::vector<std::string> blobs;
  for (int r = 0; r < 3; ++r) {
    ms.push_back(elastic::Member::reserve(r == 2 ? here : elsewhere, 0));
    blobs.push_back(ms.back()->wrap("t"));
  }
  EXPECT_TRUE(ms[2]->mine().hosts_root);
  EXPECT_FALSE(ms[0]->mine().hosts_root);
  for (int r = 0; r < 3; ++r) {
    ms[r]->unwrap_all(blobs, r);
    EXPECT_EQ(ms[r]->root_host(), 2);
  }
  std::vector<std::string> none(blobs.begin(), blobs.begin() + 2);
  ms[0]->unwrap_all(none, 0);
  EXPECT_EQ(ms[0]->root_host(), -1);
  here.stop_root_if_unused();
}

TEST(ElasticMember, MalformedBlobsAreRefusedNamingTheRank) {
  std::vector<std::string> blobs;
  auto ms = group(2, {0, 0}, &blobs);
  for (std::string bad : {std::string("short"), blobs[1].substr(0, blobs[1].size() - 1), blobs[1] + "x"}) {
    auto b = blobs;
    b[1] = bad;
    try {
      ms[0]->unwrap_all(b, 0);
      FAIL() << "accepted a malformed blob";
    } catch (const RemoteError& e) {  // the sender's fault, as a descriptor that does not decode
      EXPECT_EQ(e.culprit(), 1);
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
  }
}

TEST(ElasticMember, AnotherDigestFailsEveryRankNamingTheOthers) {
  std::vector<std::string> blobs;
  auto ms = group(3, {7, 7, 9}, &blobs);
  for (int r = 0; r < 3; ++r) {
    try {
      ms[r]->unwrap_all(blobs, r);
      FAIL() << "rank " << r << " accepted a group formed by two exclude lists";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.culprit(), r == 2 ? 0 : 2) << e.what();
      EXPECT_NE(std::string(e.what()).find("another exclude list"), std::string::npos) << e.what();
    }
  }
}

TEST(ElasticMember, ShrinkPlanRenumbersAndChecksItsList) {
  std::vector<std::string> blobs;
  auto ms = group(5, {0, 0, 0, 0, 0}, &blobs);
  for (int r = 0; r < 5; ++r) ms[r]->unwrap_all(blobs, r);
  auto p = elastic::plan_shrink(*ms[3], 3, 5, {1, 4, 1});
  EXPECT_EQ(p.survivors, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(p.new_rank, 2);
  EXPECT_EQ(p.what, "shrink(exclude=[1, 4])");
  EXPECT_EQ(p.root, nullptr);  // rank 0 hosts
  const auto f = bootstrap::read_id(p.id);
  EXPECT_EQ(f.root.port(), ms[0]->mine().port);
  EXPECT_EQ(f.world, 3);
  // Every survivor computes the same id; another list another token.
  auto p0 = elastic::plan_shrink(*ms[0], 0, 5, {4, 1});
  EXPECT_EQ(p0.id, p.id);
  EXPECT_NE(p0.root, nullptr);
  p0.root.reset();
  auto other = elastic::plan_shrink(*ms[2], 2, 5, {1});
  EXPECT_NE(bootstrap::read_id(other.id).token, f.token);
  EXPECT_NE(other.digest, p.digest);
  EXPECT_THROW(elastic::plan_shrink(*ms[3], 3, 5, {3}), InvalidArgument);
  EXPECT_THROW(elastic::plan_shrink(*ms[3], 3, 5, {5}), InvalidArgument);
  EXPECT_THROW(elastic::plan_shrink(*ms[3], 3, 5, {-1}), InvalidArgument);
  ms[3]->used = true;
  EXPECT_THROW(elastic::plan_shrink(*ms[3], 3, 5, {1}), InvalidArgument);
}

TEST(ElasticMember, ShrinkFailureNamesTheOldRank) {
  std::vector<std::string> blobs;
  auto ms = group(4, {0, 0, 0, 0}, &blobs);
  ms[3]->unwrap_all(blobs, 3);
  auto p = elastic::plan_shrink(*ms[3], 3, 4, {0});  // survivors 1, 2, 3
  try {
    elastic::rethrow_shrink_failure(p, RemoteError("rank 1 (host h pid 9) disconnected", 1, 2), 3);
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.culprit(), 2);
    EXPECT_NE(std::string(e.what()).find("rank 1 of the shrunk group is rank 2 of this group"), std::string::npos)
        << e.what();
  }
  try {  // the new root lost: its host, the lowest survivor
    elastic::rethrow_shrink_failure(p, RemoteError("lost the connection to the actorcc root", -1, 2), 3);
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.culprit(), 1);
  }
}

// Survivors 0, 1, 2, 4, 5 of 6 (rank 3 excluded), as rank 1 plans them.
elastic::ShrinkPlan plan_of_rank1(std::vector<std::unique_ptr<elastic::Member>>& ms, std::vector<std::string>& blobs) {
  ms = group(6, {0, 0, 0, 0, 0, 0}, &blobs);
  ms[1]->unwrap_all(blobs, 1);
  return elastic::plan_shrink(*ms[1], 1, 6, {3});
}

// The failure join_shrunk ends with, as the caller sees it.
Error shrink_failure(const elastic::ShrinkPlan& p, AbortSignal& old,
                     const std::function<void(std::shared_ptr<AbortSignal>)>& join) {
  try {
    elastic::join_shrunk(p, 1, std::chrono::seconds(5), old,
                         [&](std::chrono::milliseconds, std::shared_ptr<AbortSignal> sig) { join(sig); });
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "the join did not fail";
  return Error(ErrorCode::Internal, "none", 1);
}

TEST(ElasticMember, AJoinEndedByTheHostReplanningNamesTheLossNotTheHost) {
  // Ranks 3 and 4 died together; the host (rank 0) heard of rank 4 first and left the attempt:
  // its root's goodbye reaches rank 1 before rank 1's own news of rank 4. Rank 0 is alive.
  std::vector<std::unique_ptr<elastic::Member>> ms;
  std::vector<std::string> blobs;
  auto p = plan_of_rank1(ms, blobs);
  AbortSignal old(1);
  old.raise_lost(3, "rank 3 disconnected without leaving");
  Error e = shrink_failure(p, old, [&](std::shared_ptr<AbortSignal> sig) {
    sig->raise(0, ErrorCode::Remote, "join failed: rank 0 (host h pid 9) disconnected without leaving");
    old.raise_lost(4, "rank 4 disconnected without leaving");
    sig->rethrow();
  });
  EXPECT_EQ(e.culprit(), 4) << e.what();
  EXPECT_EQ(e.culprits(), (std::vector<int>{3, 4})) << e.what();
}

TEST(ElasticMember, AJoinEndedByASurvivorLeavingWaitsForTheNewsOfTheLoss) {
  // Rank 2 heard of rank 4's loss first and left the forming group; rank 1's news comes 100 ms
  // later: rank 4 is named, not rank 2.
  std::vector<std::unique_ptr<elastic::Member>> ms;
  std::vector<std::string> blobs;
  auto p = plan_of_rank1(ms, blobs);
  AbortSignal old(1);
  std::thread news;
  Error e = shrink_failure(p, old, [&](std::shared_ptr<AbortSignal> sig) {
    news = std::thread([&old] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      old.raise_lost(4, "rank 4 disconnected without leaving");
    });
    sig->raise(2, ErrorCode::Remote, "join failed: rank 2 left before the group formed");
    sig->rethrow();
  });
  news.join();
  EXPECT_EQ(e.culprit(), 4) << e.what();
  EXPECT_EQ(e.culprits(), (std::vector<int>{4})) << e.what();
}

TEST(ElasticMember, ASurvivorLeavingWithNoLossToExplainItIsNamed) {
  std::vector<std::unique_ptr<elastic::Member>> ms;
  std::vector<std::string> blobs;
  auto p = plan_of_rank1(ms, blobs);
  AbortSignal old(1);
  Error e = shrink_failure(p, old, [&](std::shared_ptr<AbortSignal> sig) {
    sig->raise(2, ErrorCode::Remote, "join failed: rank 2 left before the group formed");
    sig->rethrow();
  });
  EXPECT_EQ(e.culprit(), 2) << e.what();
}

}  // namespace
}  // namespace actorcc
