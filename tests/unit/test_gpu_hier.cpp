// The host-side logic of the GPU hierarchical backend (backends/hier/gpu_hier_schedule): a
// GPU rule for every plan the planner makes, chunks that tile the message, and a pipeline
// schedule whose stream and event order keeps every dependency and still overlaps the node
// and rail stages. The schedule is checked by simulating CUDA's stream/event semantics.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <algorithm>
#include <vector>

#include "actorcc/error.hpp"
#include "backends/hier/gpu_hier_schedule.hpp"
#include "topology/rails.hpp"

using namespace actorcc;
using namespace actorcc::hier;
using namespace actorcc::topology;

namespace {

// `sizes[n]` ranks on node n; with `spread`, rank r goes to the r-th node (mod N) that still
// has room, so the ranks of a node are not contiguous.
NodeLayout make_layout(const std::vector<int>& sizes, bool spread) {
  std::vector<std::string> names;
  std::vector<int> room = sizes;
  size_t total = 0;
  for (int s : sizes) total += static_cast<size_t>(s);
  size_t n = 0;
  while (names.size() < total) {
    if (room[n] > 0) {
      names.push_back("host" + std::to_string(n));
      --room[n];
      if (spread) n = (n + 1) % sizes.size();
    } else {
      n = (n + 1) % sizes.size();
    }
  }
  return node_layout(names);
}

std::vector<std::pair<std::vector<int>, bool>> cases() {
  std::vector<std::pair<std::vector<int>, bool>> out;
  for (int nodes = 2; nodes <= 4; ++nodes)
    for (int per = 1; per <= 8; ++per)
      for (bool spread : {false, true}) out.push_back({std::vector<int>(nodes, per), spread});
  for (const auto& u : std::vector<std::vector<int>>{{2, 1}, {1, 3}, {4, 3, 4}, {2, 5, 1, 3}, {8, 7}})
    for (bool spread : {false, true}) out.push_back({u, spread});
  return out;
}

bool is_leaders_rule(Rule r) {
  return r == Rule::LeadersReduceScatter || r == Rule::LeadersAllGather || r == Rule::LeadersBroadcast;
}
bool is_rail_only(Rule r) {
  return r == Rule::RailAllReduce || r == Rule::RailReduceScatter || r == Rule::RailAllGather ||
         r == Rule::RailBroadcast;
}

}  // namespace

TEST(GpuHierRules, EveryPlanHasTheRuleOfItsShape) {
  const Collective colls[] = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                              Collective::Broadcast, Collective::Barrier};
  for (const auto& [sizes, spread] : cases()) {
    const NodeLayout l = make_layout(sizes, spread);
    const RailPlan rp = plan_rails(l);
    const int per = l.ranks_per_node();
    for (Collective c : colls)
      for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{65537}, size_t{3} << 22 | 5})
        for (size_t es : {size_t{1}, size_t{2}, size_t{4}, size_t{8}})
          for (int root : {0, l.world() - 1}) {
            SCOPED_TRACE(std::to_string(sizes.size()) + " nodes, first " + std::to_string(sizes[0]) + ", " +
                         std::string(to_string(c)) + " count " + std::to_string(count) + " es " + std::to_string(es));
            ASSERT_TRUE(rules_serve(c));
            const HierPlan p = plan_hier(c, count, es, l, rp, root);
            Rule r{};
            ASSERT_NO_THROW(r = rule_for(c, p.name)) << p.name;
            if (c == Collective::Barrier) {
              EXPECT_EQ(r, Rule::Barrier);
              continue;
            }
            // One rank per node: the rail alone. Unequal nodes: the node-leaders rules (all-reduce's
            // is the latency rule's shape). Otherwise neither.
            EXPECT_EQ(is_rail_only(r), per == 1) << p.name;
            if (per < 0) EXPECT_TRUE(is_leaders_rule(r) || r == Rule::ReduceArBcast) << p.name;
            else EXPECT_FALSE(is_leaders_rule(r)) << p.name;
            // Sharded rules need a chunk that splits evenly over the node's ranks.
            if ((r == Rule::RsArAg || r == Rule::ScatterBcastAg) && p.chunk_elems)
              EXPECT_EQ(p.chunk_elems % static_cast<size_t>(per), 0u) << p.name;
          }
  }
}

TEST(GpuHierRules, UnknownPlansAndCallsAreRefused) {
  EXPECT_THROW(rule_for(Collective::AllReduce, "hier_rs_rs"), Error);
  EXPECT_THROW(rule_for(Collective::AllReduce, "a_new_rule"), Error);
  EXPECT_THROW(rule_for(Collective::Reduce, "hier_reduce_ar_bcast"), Error);
  for (Collective c : {Collective::Reduce, Collective::Gather, Collective::Scatter, Collective::AllToAll,
                       Collective::AllToAllV, Collective::Send, Collective::Recv, Collective::SendRecv})
    EXPECT_FALSE(rules_serve(c)) << to_string(c);
}

TEST(GpuHierRules, ChunksTileTheMessageWithinTheSlot) {
  for (size_t total : {size_t{0}, size_t{1}, size_t{6}, size_t{1000}, size_t{1} << 20, (size_t{1} << 24) + 8})
    for (size_t plan_chunk : {size_t{0}, size_t{64}, size_t{1} << 20})
      for (size_t fit : {size_t{1}, size_t{100}, size_t{1} << 21})
        for (size_t align : {size_t{1}, size_t{2}, size_t{8}}) {
          const size_t t = total / align * align;  // callers pass a multiple for sharded rules
          const auto cs = cut_chunks(t, plan_chunk, fit, align);
          size_t at = 0;
          for (auto [c0, cn] : cs) {
            EXPECT_EQ(c0, at);
            EXPECT_GT(cn, 0u);
            EXPECT_EQ(cn % align, 0u);
            EXPECT_LE(cn, std::max(align, (plan_chunk ? std::min(plan_chunk, fit) : fit) / align * align));
            at += cn;
          }
          EXPECT_EQ(at, t) << total << " " << plan_chunk << " " << fit << " " << align;
        }
}

namespace {

// Simulates the schedule with CUDA's semantics: ops on one stream run in order; a record
// captures what its stream has issued so far, a wait makes the waiting stream's later ops
// follow the record's state at the time of the wait. Returns, per run (stage, chunk), the runs
// that must finish before it.
struct Sim {
  std::map<std::pair<int, size_t>, std::set<std::pair<int, size_t>>> before;
  std::map<std::pair<int, size_t>, int> runs;
  std::vector<std::pair<int, size_t>> order;
};

Sim simulate(const std::vector<PipeOp>& ops) {
  Sim s;
  std::set<std::pair<int, size_t>> stream[2];  // what the next op of a stream waits for
  std::map<std::pair<int, int>, std::set<std::pair<int, size_t>>> event;  // (event, slot) -> captured
  for (const PipeOp& op : ops) {
    auto& st = stream[op.stage == 1 ? 1 : 0];
    switch (op.kind) {
      case PipeOp::Run: {
        const auto key = std::make_pair(op.stage, op.chunk);
        s.before[key] = st;
        ++s.runs[key];
        s.order.push_back(key);
        st.insert(key);
        break;
      }
      case PipeOp::Record: event[{op.event, op.slot}] = st; break;
      case PipeOp::Wait: {
        auto it = event.find({op.event, op.slot});
        if (it != event.end()) st.insert(it->second.begin(), it->second.end());
        break;
      }
    }
  }
  return s;
}

}  // namespace

TEST(GpuHierRules, PipelineKeepsEveryDependencyAndOverlaps) {
  for (int stages : {2, 3})
    for (int depth : {1, 2})
      for (size_t C : {size_t{1}, size_t{2}, size_t{3}, size_t{7}}) {
        SCOPED_TRACE(std::to_string(stages) + " stages, depth " + std::to_string(depth) + ", " + std::to_string(C) +
                     " chunks");
        const auto ops = pipeline_schedule(C, depth, stages);
        const Sim s = simulate(ops);
        for (const PipeOp& op : ops)
          if (op.kind == PipeOp::Run) EXPECT_EQ(op.slot, static_cast<int>(op.chunk % depth));
        for (size_t c = 0; c < C; ++c)
          for (int st = 0; st < stages; ++st) {
            ASSERT_EQ(s.runs.at({st, c}), 1);
            const auto& b = s.before.at({st, c});
            if (st > 0) EXPECT_TRUE(b.count({st - 1, c})) << "stage " << st << " of chunk " << c << " before its input";
            // Slot reuse: the chunk D earlier is done with the slot (all its stages).
            if (st == 0 && c >= static_cast<size_t>(depth))
              for (int q = 0; q < stages; ++q)
                EXPECT_TRUE(b.count({q, c - depth})) << "chunk " << c << " reuses the slot of chunk " << c - depth
                                                     << " before its stage " << q;
          }
        // Overlap: with two slots, chunk c + 1's first stage need not wait for chunk c's second.
        if (depth == 2)
          for (size_t c = 0; c + 1 < C; ++c) EXPECT_FALSE(s.before.at({0, c + 1}).count({1, c})) << c;
      }
}
