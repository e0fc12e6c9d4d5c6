// Rails and the hierarchical planner. Besides the shape of each plan, every plan is run by a
// small interpreter of its steps over random integers on simulated ranks (equal and unequal
// nodes, 1-8 ranks per node, 2-4 nodes, permuted placement, odd sizes, several chunks) and
// compared with the flat collective: a plan whose steps do not compose to the collective fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "actorcc/error.hpp"
#include "topology/rails.hpp"

using namespace actorcc;
using namespace actorcc::topology;

namespace {

// Node names for `sizes[n]` ranks on node n, placed round-robin over the nodes that still
// have room (so ranks of one node are not contiguous), or node by node.
std::vector<std::string> placement(const std::vector<int>& sizes, bool interleave) {
  std::vector<std::string> hosts;
  std::vector<int> left = sizes;
  int total = std::accumulate(sizes.begin(), sizes.end(), 0);
  for (size_t n = 0; hosts.size() < static_cast<size_t>(total); n = interleave ? (n + 1) % sizes.size() : n) {
    if (left[n] == 0) {
      if (!interleave) ++n;
      continue;
    }
    hosts.push_back("node-" + std::to_string(n));
    --left[n];
  }
  return hosts;
}

// The layouts every rule is checked on.
std::vector<std::vector<int>> layouts() {
  std::vector<std::vector<int>> out;
  for (int nodes = 2; nodes <= 4; ++nodes)
    for (int per = 1; per <= 8; ++per) out.push_back(std::vector<int>(nodes, per));
  out.push_back({1});
  out.push_back({4});
  out.push_back({3, 2});
  out.push_back({1, 4});
  out.push_back({8, 7, 8});
  out.push_back({2, 5, 1, 3});
  return out;
}

// ---- a reference interpreter of plans ----

struct Sim {
  const NodeLayout& l;
  const RailPlan& rp;
  size_t count;   // elements per block
  int blocks;     // blocks per buffer: world for reduce_scatter / all_gather, else 1

  // The element indices of `part` for rank r, inside the chunk [c0, c0 + cn) of each block.
  std::vector<size_t> range(Part part, int r, size_t c0, size_t cn) const {
    std::vector<size_t> idx;
    auto add_block = [&](int b) {
      for (size_t i = 0; i < cn; ++i) idx.push_back(static_cast<size_t>(b) * count + c0 + i);
    };
    switch (part) {
      case Part::Whole:
        for (int b = 0; b < blocks; ++b) add_block(b);
        break;
      case Part::Shard: {
        int per = static_cast<int>(l.nodes[l.node_of[r]].size());
        auto [off, len] = shard_range(cn, per, l.local_index[r]);
        for (size_t i = 0; i < len; ++i) idx.push_back(c0 + off + i);
        break;
      }
      case Part::OwnBlock: add_block(r); break;
      case Part::RailBlocks:
        for (int q : rp.rails.at(rp.rail_of.at(r))) add_block(q);
        break;
      case Part::NodeBlocks:
        for (int q : l.nodes[l.node_of[r]]) add_block(q);
        break;
    }
    return idx;
  }

  // The groups a step runs in: members in scope order (local index / node index).
  std::vector<std::vector<int>> groups(const Step& s) const {
    std::vector<std::vector<int>> g;
    const auto& all = s.scope == Scope::Node ? l.nodes : rp.rails;
    for (size_t i = 0; i < all.size(); ++i)
      if (s.only == Step::kEvery || s.only == static_cast<int>(i)) g.push_back(all[i]);
    return g;
  }

  void run(const Step& s, std::vector<std::vector<long>>& buf, size_t c0, size_t cn) const {
    for (const auto& members : groups(s)) {
      ASSERT_FALSE(members.empty());
      auto old = buf;
      auto at = [&](int m) { return range(s.part, members[m], c0, cn); };
      int n = static_cast<int>(members.size());
      ASSERT_TRUE(s.root >= 0 && (s.root < n || s.op == StepOp::AllReduce || s.op == StepOp::ReduceScatter ||
                                  s.op == StepOp::AllGather || s.op == StepOp::Barrier))
          << to_string(s);
      switch (s.op) {
        case StepOp::Barrier: break;
        case StepOp::AllReduce:
          // All members must agree on what they reduce.
          for (int m = 1; m < n; ++m) ASSERT_EQ(at(m), at(0)) << to_string(s);
          [[fallthrough]];
        case StepOp::ReduceScatter:
          for (int m = 0; m < n; ++m)
            for (size_t i : at(m)) {
              long sum = 0;
              for (int k = 0; k < n; ++k) sum += old[members[k]][i];
              buf[members[m]][i] = sum;
            }
          break;
        case StepOp::Reduce:
          for (size_t i : at(s.root)) {
            long sum = 0;
            for (int k = 0; k < n; ++k) sum += old[members[k]][i];
            buf[members[s.root]][i] = sum;
          }
          break;
        case StepOp::AllGather:
          for (int j = 0; j < n; ++j)
            for (size_t i : at(j))
              for (int m = 0; m < n; ++m) buf[members[m]][i] = old[members[j]][i];
          break;
        case StepOp::Gather:
          for (int j = 0; j < n; ++j)
            for (size_t i : at(j)) buf[members[s.root]][i] = old[members[j]][i];
          break;
        case StepOp::Broadcast:
        case StepOp::Scatter:
          for (int m = 0; m < n; ++m)
            for (size_t i : at(m)) buf[members[m]][i] = old[members[s.root]][i];
          break;
      }
    }
  }

  void run(const HierPlan& p, std::vector<std::vector<long>>& buf) const {
    size_t chunk = p.chunk_elems ? p.chunk_elems : count;
    size_t chunks = 0;
    for (size_t c0 = 0; c0 < count || (count == 0 && chunks == 0); c0 += chunk, ++chunks) {
      size_t cn = std::min(chunk, count - c0);
      for (const Step& s : p.steps) run(s, buf, c0, cn);
      if (count == 0) break;
    }
    if (count) EXPECT_EQ(chunks, p.num_chunks) << p.name;
  }
};

std::vector<std::vector<long>> random_buffers(int world, size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<long> d(-1000, 1000);
  std::vector<std::vector<long>> b(world, std::vector<long>(n));
  for (auto& v : b)
    for (auto& x : v) x = d(rng);
  return b;
}

// Every rank's buffer added element by element.
std::vector<long> elementwise_sum(const std::vector<std::vector<long>>& bufs) {
  std::vector<long> sum(bufs.at(0).size(), 0);
  for (const auto& b : bufs)
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += b[i];
  return sum;
}

// Small tuning so that modest counts already take the chunked, pipelined path.
HierTuning small_tuning() {
  HierTuning t;
  t.latency_max_bytes = 64;  // 8 longs
  t.chunk_bytes = 7 * sizeof(long) * 8;
  return t;
}

}  // namespace

TEST(Rails, NodeLayoutFollowsFirstAppearanceUnderPermutedPlacement) {
  NodeLayout l = node_layout(std::vector<std::string>{"b", "a", "b", "c", "a", "b"});
  EXPECT_EQ(l.num_nodes(), 3);
  EXPECT_EQ(l.nodes, (std::vector<std::vector<int>>{{0, 2, 5}, {1, 4}, {3}}));
  EXPECT_EQ(l.local_index, (std::vector<int>{0, 0, 1, 0, 1, 2}));
  EXPECT_FALSE(l.equal_nodes());
  EXPECT_EQ(l.ranks_per_node(), -1);
}

TEST(Rails, EqualNodesGiveOneRailPerLocalIndexWithOneRankOfEveryNode) {
  for (const auto& sizes : layouts()) {
    if (std::adjacent_find(sizes.begin(), sizes.end(), std::not_equal_to<>()) != sizes.end()) continue;
    for (bool interleave : {false, true}) {
      NodeLayout l = node_layout(placement(sizes, interleave));
      RailPlan rp = plan_rails(l);
      SCOPED_TRACE(testing::Message() << sizes.size() << " nodes x " << sizes[0] << (interleave ? " interleaved" : ""));
      ASSERT_EQ(rp.shape, RailPlan::Shape::PerLocalIndex);
      EXPECT_TRUE(rp.note.empty());
      ASSERT_EQ(rp.rails.size(), static_cast<size_t>(sizes[0]));
      std::set<int> seen;
      for (size_t k = 0; k < rp.rails.size(); ++k) {
        ASSERT_EQ(rp.rails[k].size(), sizes.size());
        for (size_t n = 0; n < sizes.size(); ++n) {
          int r = rp.rails[k][n];
          // One rank per node, in node order, all of local index k: never two of one node.
          EXPECT_EQ(l.node_of[r], static_cast<int>(n));
          EXPECT_EQ(l.local_index[r], static_cast<int>(k));
          EXPECT_EQ(rp.rail_of[r], static_cast<int>(k));
          EXPECT_TRUE(seen.insert(r).second);
        }
      }
      EXPECT_EQ(seen.size(), static_cast<size_t>(l.world()));
    }
  }
}

TEST(Rails, InterleavedTwoByFourPairsNeighbours) {
  // ranks 0,2,4,6 on one node and 1,3,5,7 on the other (a launcher that alternates nodes).
  RailPlan rp = plan_rails(node_layout(placement({4, 4}, true)));
  EXPECT_EQ(rp.rails, (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
}

TEST(Rails, UnequalNodesFallBackToNodeLeadersAndSayWhy) {
  NodeLayout l = node_layout(placement({3, 1, 2}, true));
  RailPlan rp = plan_rails(l);
  ASSERT_EQ(rp.shape, RailPlan::Shape::NodeLeaders);
  ASSERT_EQ(rp.rails.size(), 1u);
  ASSERT_EQ(rp.rails[0].size(), 3u);
  for (int n = 0; n < 3; ++n) EXPECT_EQ(rp.rails[0][n], l.nodes[n].front());
  int in_rail = 0;
  for (int r = 0; r < l.world(); ++r) in_rail += rp.rail_of[r] == 0;
  EXPECT_EQ(in_rail, 3);
  EXPECT_NE(rp.note.find("3, 1, 2"), std::string::npos) << rp.note;
}

TEST(Rails, ShardRangeCoversOddSizesExactlyOnce) {
  for (size_t count : {0, 1, 2, 7, 8, 9, 1023})
    for (int parts = 1; parts <= 9; ++parts) {
      size_t next = 0, lo = count, hi = 0;
      for (int i = 0; i < parts; ++i) {
        auto [off, len] = shard_range(count, parts, i);
        EXPECT_EQ(off, next);
        next = off + len;
        lo = std::min(lo, len);
        hi = std::max(hi, len);
      }
      EXPECT_EQ(next, count);
      EXPECT_LE(hi - std::min(lo, hi), 1u);
    }
  EXPECT_THROW(shard_range(4, 2, 2), InvalidArgument);
  EXPECT_THROW(shard_range(4, 0, 0), InvalidArgument);
}

TEST(HierPlanner, AllReduceRules) {
  HierTuning t;  // defaults: 256 KiB latency bar, 4 MiB chunks
  NodeLayout two_by_eight = node_layout(placement({8, 8}, false));
  RailPlan rails = plan_rails(two_by_eight);
  HierPlan small = plan_hier(Collective::AllReduce, 1024, 4, two_by_eight, rails, 0, t);
  EXPECT_EQ(small.name, "hier_reduce_ar_bcast");
  EXPECT_EQ(small.num_chunks, 1u);
  ASSERT_EQ(small.steps.size(), 3u);
  EXPECT_EQ(small.steps[1], (Step{Scope::Rail, StepOp::AllReduce, Part::Whole, 0, 0}));

  HierPlan large = plan_hier(Collective::AllReduce, size_t{256} << 20, 4, two_by_eight, rails, 0, t);
  EXPECT_EQ(large.name, "hier_rs_ar_ag");
  EXPECT_EQ(large.steps, (std::vector<Step>{{Scope::Node, StepOp::ReduceScatter, Part::Shard},
                                            {Scope::Rail, StepOp::AllReduce, Part::Shard},
                                            {Scope::Node, StepOp::AllGather, Part::Shard}}));
  EXPECT_EQ(large.chunk_elems, size_t{1} << 20);  // 4 MiB of float, a multiple of 8
  EXPECT_EQ(large.num_chunks, 256u);
  EXPECT_EQ(large.pipeline_depth, 2);

  // 1 MiB: above the latency bar, below one chunk: sharded but not pipelined.
  HierPlan mid = plan_hier(Collective::AllReduce, size_t{1} << 18, 4, two_by_eight, rails, 0, t);
  EXPECT_EQ(mid.name, "hier_rs_ar_ag");
  EXPECT_EQ(mid.num_chunks, 1u);
  EXPECT_EQ(mid.pipeline_depth, 1);

  NodeLayout unequal = node_layout(placement({3, 2}, true));
  EXPECT_EQ(plan_hier(Collective::AllReduce, 1 << 20, 4, unequal, plan_rails(unequal)).name, "leaders_reduce_ar_bcast");
  NodeLayout one_each = node_layout(placement({1, 1, 1}, false));
  EXPECT_EQ(plan_hier(Collective::AllReduce, 1 << 20, 4, one_each, plan_rails(one_each)).name, "rail_all_reduce");
  NodeLayout single = node_layout(placement({4}, false));
  EXPECT_EQ(plan_hier(Collective::AllReduce, 1 << 20, 4, single, plan_rails(single)).name, "node_all_reduce");
}

TEST(HierPlanner, OtherCollectivesRules) {
  NodeLayout l = node_layout(placement({4, 4}, true));
  RailPlan rp = plan_rails(l);
  EXPECT_EQ(plan_hier(Collective::ReduceScatter, 100, 4, l, rp).name, "hier_rs_rs");
  EXPECT_EQ(plan_hier(Collective::AllGather, 100, 4, l, rp).name, "hier_ag_ag");
  // 16 MiB blocks: four 4 MiB chunks of every block, pipelined.
  HierPlan rs = plan_hier(Collective::ReduceScatter, size_t{4} << 20, 4, l, rp);
  EXPECT_EQ(rs.num_chunks, 4u);
  EXPECT_EQ(rs.pipeline_depth, 2);
  EXPECT_EQ(plan_hier(Collective::AllGather, size_t{4} << 20, 4, l, rp).num_chunks, 4u);
  EXPECT_EQ(plan_hier(Collective::AllGather, 1000, 4, l, rp).num_chunks, 1u);
  EXPECT_EQ(plan_hier(Collective::Barrier, 0, 1, l, rp).name, "hier_barrier");
  // Root 5 is node 1, local index 2: the small path broadcasts on rail 2 only.
  HierPlan b = plan_hier(Collective::Broadcast, 16, 4, l, rp, 5);
  EXPECT_EQ(b.name, "hier_rail_bcast_node_bcast");
  EXPECT_EQ(b.steps, (std::vector<Step>{{Scope::Rail, StepOp::Broadcast, Part::Whole, 1, 2},
                                        {Scope::Node, StepOp::Broadcast, Part::Whole, 2}}));
  EXPECT_EQ(plan_hier(Collective::Broadcast, 1 << 24, 4, l, rp, 5).name, "hier_scatter_bcast_ag");
  EXPECT_THROW(plan_hier(Collective::Broadcast, 16, 4, l, rp, 8), InvalidArgument);
  NodeLayout u = node_layout(placement({2, 3}, false));
  RailPlan urp = plan_rails(u);
  EXPECT_EQ(plan_hier(Collective::ReduceScatter, 10, 4, u, urp).name, "leaders_reduce_ar_scatter");
  EXPECT_EQ(plan_hier(Collective::AllGather, 10, 4, u, urp).name, "leaders_gather_ag_bcast");
  EXPECT_EQ(plan_hier(Collective::Broadcast, 10, 4, u, urp, 3).steps.size(), 3u);  // root 3 is no leader
  EXPECT_EQ(plan_hier(Collective::Broadcast, 10, 4, u, urp, 2).steps.size(), 2u);  // root 2 leads node 1
  // Reduce toward the root's node: small on the root's rail alone, large on every rail then a
  // gather inside the root's node; unequal nodes through the leaders.
  HierPlan small = plan_hier(Collective::Reduce, 16, 4, l, rp, 5);
  EXPECT_EQ(small.name, "hier_reduce_reduce");
  EXPECT_EQ(small.steps, (std::vector<Step>{{Scope::Node, StepOp::Reduce, Part::Whole, 2},
                                         {Scope::Rail, StepOp::Reduce, Part::Whole, 1, 2}}));
  HierPlan large = plan_hier(Collective::Reduce, 1 << 24, 4, l, rp, 5);
  EXPECT_EQ(large.name, "hier_rs_reduce_gather");
  EXPECT_EQ(large.steps, (std::vector<Step>{{Scope::Node, StepOp::ReduceScatter, Part::Shard},
                                         {Scope::Rail, StepOp::Reduce, Part::Shard, 1},
                                         {Scope::Node, StepOp::Gather, Part::Shard, 2, 1}}));
  EXPECT_EQ(large.num_chunks, 16u);
  EXPECT_THROW(plan_hier(Collective::Reduce, 16, 4, l, rp, 8), InvalidArgument);
  EXPECT_EQ(plan_hier(Collective::Reduce, 10, 4, u, urp, 3).name, "leaders_reduce_reduce");
  EXPECT_EQ(plan_hier(Collective::Reduce, 10, 4, u, urp, 3).steps.size(), 3u);  // root 3 is no leader
  EXPECT_EQ(plan_hier(Collective::Reduce, 10, 4, u, urp, 2).steps.size(), 2u);
  NodeLayout one_each = node_layout(placement({1, 1, 1}, false));
  EXPECT_EQ(plan_hier(Collective::Reduce, 10, 4, one_each, plan_rails(one_each), 1).name, "rail_reduce");
}

TEST(HierPlanner, NetworkStepsNeverJoinTwoRanksOfOneNode) {
  for (const auto& sizes : layouts()) {
    NodeLayout l = node_layout(placement(sizes, true));
    RailPlan rp = plan_rails(l);
    for (const auto& rail : rp.rails) {
      std::set<int> nodes;
      for (int r : rail) EXPECT_TRUE(nodes.insert(l.node_of[r]).second);
    }
  }
}

// Every rule, every layout, odd sizes, chunked and not: the steps compose to the collective.
TEST(HierPlanner, PlansComputeTheFlatCollective) {
  std::mt19937 rng(std::random_device{}());
  HierTuning t = small_tuning();
  int checked = 0;
  for (const auto& sizes : layouts())
    for (bool interleave : {false, true}) {
      NodeLayout l = node_layout(placement(sizes, interleave));
      RailPlan rp = plan_rails(l);
      int w = l.world();
      for (size_t count : {size_t{1}, size_t{5}, size_t{8}, size_t{67}, size_t{133}}) {
        SCOPED_TRACE(testing::Message() << "layout " << testing::PrintToString(sizes) << (interleave ? " interleaved" : "")
                                        << ", count " << count);
        {  // all_reduce
          HierPlan p = plan_hier(Collective::AllReduce, count, sizeof(long), l, rp, 0, t);
          Sim sim{l, rp, count, 1};
          auto buf = random_buffers(w, count, rng);
          const std::vector<long> want = elementwise_sum(buf);
          sim.run(p, buf);
          for (int r = 0; r < w; ++r) ASSERT_EQ(buf[r], want) << p.name << " rank " << r;
        }
        for (int root = 0; root < w; root += std::max(1, w / 3)) {  // broadcast
          HierPlan p = plan_hier(Collective::Broadcast, count, sizeof(long), l, rp, root, t);
          Sim sim{l, rp, count, 1};
          auto buf = random_buffers(w, count, rng);
          auto want = buf[root];
          sim.run(p, buf);
          for (int r = 0; r < w; ++r) ASSERT_EQ(buf[r], want) << p.name << " root " << root << " rank " << r;
        }
        for (int root = 0; root < w; root += std::max(1, w / 3)) {  // reduce: the root ends with the sum
          HierPlan p = plan_hier(Collective::Reduce, count, sizeof(long), l, rp, root, t);
          Sim sim{l, rp, count, 1};
          auto buf = random_buffers(w, count, rng);
          const std::vector<long> want = elementwise_sum(buf);
          sim.run(p, buf);
          ASSERT_EQ(buf[root], want) << p.name << " root " << root;
        }
        {  // reduce_scatter: rank r ends with the sum of every rank's block r
          HierPlan p = plan_hier(Collective::ReduceScatter, count, sizeof(long), l, rp, 0, t);
          Sim sim{l, rp, count, w};
          auto buf = random_buffers(w, count * w, rng);
          const std::vector<long> sum = elementwise_sum(buf);
          sim.run(p, buf);
          for (int r = 0; r < w; ++r)
            ASSERT_TRUE(std::equal(sum.begin() + r * count, sum.begin() + (r + 1) * count, buf[r].begin() + r * count))
                << p.name << " rank " << r;
        }
        {  // all_gather: every rank ends with every rank's own block
          HierPlan p = plan_hier(Collective::AllGather, count, sizeof(long), l, rp, 0, t);
          Sim sim{l, rp, count, w};
          auto buf = random_buffers(w, count * w, rng);
          std::vector<long> want(count * w);
          for (int q = 0; q < w; ++q) std::copy_n(buf[q].begin() + q * count, count, want.begin() + q * count);
          sim.run(p, buf);
          for (int r = 0; r < w; ++r) ASSERT_EQ(buf[r], want) << p.name << " rank " << r;
        }
        ++checked;
      }
    }
  EXPECT_GT(checked, 100);
}
