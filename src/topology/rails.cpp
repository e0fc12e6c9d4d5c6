#include "topology/rails.hpp"

#include <algorithm>
#include <string>

#include "actorcc/error.hpp"
#include "topology/topology.hpp"

namespace actorcc::topology {

bool NodeLayout::equal_nodes() const { return ranks_per_node() > 0; }

int NodeLayout::ranks_per_node() const {
  if (nodes.empty()) return -1;
  size_t n = nodes.front().size();
  for (const auto& node : nodes)
    if (node.size() != n) return -1;
  return static_cast<int>(n);
}

NodeLayout node_layout(std::vector<PeerInfo> peers) {
  // assign_nodes is the one definition of node numbering and local ranks; the layout is its
  // result, indexed both ways.
  int num_nodes = assign_nodes(peers);
  NodeLayout l;
  l.nodes.resize(num_nodes);
  for (const auto& p : peers) {
    l.node_of.push_back(p.node);
    l.local_index.push_back(p.local_rank);
    l.nodes[p.node].push_back(static_cast<int>(l.node_of.size()) - 1);
  }
  return l;
}

NodeLayout node_layout(const std::vector<std::string>& host_ids) {
  std::vector<PeerInfo> peers(host_ids.size());
  for (size_t r = 0; r < host_ids.size(); ++r) {
    peers[r].rank = static_cast<int>(r);
    peers[r].host_id = host_ids[r];
  }
  return node_layout(std::move(peers));
}

RailPlan plan_rails(const NodeLayout& l) {
  RailPlan p;
  p.rail_of.assign(l.world(), -1);
  int per_node = l.ranks_per_node();
  if (per_node > 0) {
    p.shape = RailPlan::Shape::PerLocalIndex;
    p.rails.resize(per_node);
    for (int k = 0; k < per_node; ++k)
      for (const auto& node : l.nodes) {
        p.rails[k].push_back(node[k]);
        p.rail_of[node[k]] = k;
      }
    return p;
  }
  p.shape = RailPlan::Shape::NodeLeaders;
  p.rails.resize(1);
  std::string sizes;
  for (const auto& node : l.nodes) {
    p.rails[0].push_back(node.front());
    p.rail_of[node.front()] = 0;
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(node.size());
  }
  p.note = "nodes hold unequal numbers of ranks (" + sizes +
           "): one rail of node leaders carries the network part, the other ranks go through their leader";
  return p;
}

std::pair<size_t, size_t> shard_range(size_t count, int parts, int index) {
  if (parts <= 0 || index < 0 || index >= parts) throw InvalidArgument("shard_range: index out of range");
  size_t base = count / parts, extra = count % parts, i = static_cast<size_t>(index);
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

const char* to_string(Scope s) { return s == Scope::Node ? "node" : "rail"; }
const char* to_string(StepOp o) {
  switch (o) {
    case StepOp::ReduceScatter: return "reduce_scatter";
    case StepOp::AllReduce: return "all_reduce";
    case StepOp::AllGather: return "all_gather";
    case StepOp::Reduce: return "reduce";
    case StepOp::Broadcast: return "broadcast";
    case StepOp::Scatter: return "scatter";
    case StepOp::Gather: return "gather";
    case StepOp::Barrier: return "barrier";
  }
  return "?";
}
const char* to_string(Part p) {
  switch (p) {
    case Part::Whole: return "whole";
    case Part::Shard: return "shard";
    case Part::OwnBlock: return "own_block";
    case Part::RailBlocks: return "rail_blocks";
    case Part::NodeBlocks: return "node_blocks";
  }
  return "?";
}
std::string to_string(const Step& s) {
  std::string out = std::string(to_string(s.scope)) + " " + to_string(s.op) + " " + to_string(s.part);
  if (s.op == StepOp::Reduce || s.op == StepOp::Broadcast || s.op == StepOp::Scatter || s.op == StepOp::Gather)
    out += " root " + std::to_string(s.root);
  if (s.only != Step::kEvery) out += std::string(" only ") + to_string(s.scope) + " " + std::to_string(s.only);
  return out;
}

namespace {

constexpr int kEvery = Step::kEvery;

Step node(StepOp op, Part part, int root = 0, int only = kEvery) { return {Scope::Node, op, part, root, only}; }
Step rail(StepOp op, Part part, int root = 0, int only = kEvery) { return {Scope::Rail, op, part, root, only}; }

// Cuts `count` elements into chunks of about tuning.chunk_bytes, a multiple of `align`
// elements (so every chunk shards evenly where it can), when the message is large enough to
// gain from overlapping the node and the rail steps of consecutive chunks.
void chunk(HierPlan& p, size_t count, size_t elem_bytes, size_t align, const HierTuning& t) {
  size_t elems = std::max<size_t>(1, t.chunk_bytes / std::max<size_t>(1, elem_bytes));
  elems = std::max(align, elems / align * align);
  if (count <= elems) return;  // one chunk: nothing to overlap
  p.chunk_elems = elems;
  p.num_chunks = (count + elems - 1) / elems;
  p.pipeline_depth = std::max(1, t.pipeline_depth);
}

HierPlan all_reduce(size_t count, size_t bytes, size_t elem_bytes, const NodeLayout& l, const RailPlan& r,
                    const HierTuning& t) {
  HierPlan p;
  int per_node = l.ranks_per_node();
  if (l.num_nodes() == 1) {
    p = {"node_all_reduce", {node(StepOp::AllReduce, Part::Whole)}};
  } else if (per_node == 1) {
    p = {"rail_all_reduce", {rail(StepOp::AllReduce, Part::Whole)}};
  } else if (r.shape == RailPlan::Shape::NodeLeaders) {
    p = {"leaders_reduce_ar_bcast",
         {node(StepOp::Reduce, Part::Whole), rail(StepOp::AllReduce, Part::Whole, 0, 0),
          node(StepOp::Broadcast, Part::Whole)}};
  } else if (bytes <= t.latency_max_bytes) {
    // Small: three latency-bound steps, one network hop on one rail; splitting a few KB into
    // shards would only multiply the per-step latency.
    p = {"hier_reduce_ar_bcast",
         {node(StepOp::Reduce, Part::Whole), rail(StepOp::AllReduce, Part::Whole, 0, 0),
          node(StepOp::Broadcast, Part::Whole)}};
    return p;
  } else {
    // Large: every rail carries 1/L of the data, so all of a node's NICs work at once and
    // each network byte is a reduced byte.
    p = {"hier_rs_ar_ag",
         {node(StepOp::ReduceScatter, Part::Shard), rail(StepOp::AllReduce, Part::Shard),
          node(StepOp::AllGather, Part::Shard)}};
    chunk(p, count, elem_bytes, static_cast<size_t>(per_node), t);
    return p;
  }
  if (bytes > t.latency_max_bytes) chunk(p, count, elem_bytes, 1, t);
  return p;
}

HierPlan reduce_scatter_rule(const NodeLayout& l, const RailPlan& r) {
  if (l.num_nodes() == 1) return {"node_reduce_scatter", {node(StepOp::ReduceScatter, Part::OwnBlock)}};
  if (l.ranks_per_node() == 1) return {"rail_reduce_scatter", {rail(StepOp::ReduceScatter, Part::OwnBlock)}};
  if (r.shape == RailPlan::Shape::NodeLeaders)
    return {"leaders_reduce_ar_scatter",
            {node(StepOp::Reduce, Part::Whole), rail(StepOp::AllReduce, Part::Whole, 0, 0),
             node(StepOp::Scatter, Part::OwnBlock)}};
  // Local index k reduces, over its node, the blocks that rail k's ranks will own; the rail
  // then reduces those across nodes, and each rank keeps its own block.
  return {"hier_rs_rs", {node(StepOp::ReduceScatter, Part::RailBlocks), rail(StepOp::ReduceScatter, Part::OwnBlock)}};
}

HierPlan all_gather_rule(const NodeLayout& l, const RailPlan& r) {
  if (l.num_nodes() == 1) return {"node_all_gather", {node(StepOp::AllGather, Part::OwnBlock)}};
  if (l.ranks_per_node() == 1) return {"rail_all_gather", {rail(StepOp::AllGather, Part::OwnBlock)}};
  if (r.shape == RailPlan::Shape::NodeLeaders)
    return {"leaders_gather_ag_bcast",
            {node(StepOp::Gather, Part::OwnBlock), rail(StepOp::AllGather, Part::NodeBlocks, 0, 0),
             node(StepOp::Broadcast, Part::Whole)}};
  // The network moves each block once per other node (on its own rail), not once per rank.
  return {"hier_ag_ag", {rail(StepOp::AllGather, Part::OwnBlock), node(StepOp::AllGather, Part::RailBlocks)}};
}

HierPlan broadcast(size_t count, size_t bytes, size_t elem_bytes, const NodeLayout& l, const RailPlan& r, int root,
                   const HierTuning& t) {
  if (root < 0 || root >= l.world()) throw InvalidArgument("broadcast root " + std::to_string(root) + " out of range");
  int root_node = l.node_of[root], root_local = l.local_index[root];
  HierPlan p;
  int per_node = l.ranks_per_node();
  if (l.num_nodes() == 1) {
    p = {"node_broadcast", {node(StepOp::Broadcast, Part::Whole, root_local)}};
  } else if (per_node == 1) {
    p = {"rail_broadcast", {rail(StepOp::Broadcast, Part::Whole, root_node)}};
  } else if (r.shape == RailPlan::Shape::NodeLeaders) {
    p.name = "leaders_bcast";
    // A root that is not its node's leader hands the data to the leader first.
    if (root_local != 0) p.steps.push_back(node(StepOp::Broadcast, Part::Whole, root_local, root_node));
    p.steps.push_back(rail(StepOp::Broadcast, Part::Whole, root_node, 0));
    p.steps.push_back(node(StepOp::Broadcast, Part::Whole, 0));
  } else if (bytes <= t.latency_max_bytes) {
    p = {"hier_rail_bcast_node_bcast",
         {rail(StepOp::Broadcast, Part::Whole, root_node, root_local), node(StepOp::Broadcast, Part::Whole, root_local)}};
    return p;
  } else {
    // Large: the root's node scatters shards so that every rail broadcasts 1/L of the data.
    p = {"hier_scatter_bcast_ag",
         {node(StepOp::Scatter, Part::Shard, root_local, root_node), rail(StepOp::Broadcast, Part::Shard, root_node),
          node(StepOp::AllGather, Part::Shard)}};
    chunk(p, count, elem_bytes, static_cast<size_t>(per_node), t);
    return p;
  }
  if (bytes > t.latency_max_bytes) chunk(p, count, elem_bytes, 1, t);
  return p;
}

// Rooted reduce: the reducing steps of all_reduce, with the result moved to the root alone,
// so every element is reduced from the same inputs in the same order as all_reduce (reduce
// agrees bitwise with it) while each network byte goes one way, to the root's node.
HierPlan reduce(size_t count, size_t bytes, size_t elem_bytes, const NodeLayout& l, const RailPlan& r, int root,
                const HierTuning& t) {
  if (root < 0 || root >= l.world()) throw InvalidArgument("reduce root " + std::to_string(root) + " out of range");
  const int root_node = l.node_of[root], root_local = l.local_index[root], per_node = l.ranks_per_node();
  HierPlan p;
  if (l.num_nodes() == 1) {
    p = {"node_reduce", {node(StepOp::Reduce, Part::Whole, root_local)}};
  } else if (per_node == 1) {
    p = {"rail_reduce", {rail(StepOp::Reduce, Part::Whole, root_node)}};
  } else if (r.shape == RailPlan::Shape::NodeLeaders) {
    p = {"leaders_reduce_reduce", {node(StepOp::Reduce, Part::Whole), rail(StepOp::Reduce, Part::Whole, root_node, 0)}};
    // A root that is not its node's leader gets the result from the leader.
    if (root_local != 0) p.steps.push_back(node(StepOp::Broadcast, Part::Whole, 0, root_node));
  } else if (bytes <= t.latency_max_bytes) {
    // Small: each node reduces to the rank on the root's rail, which reduces across nodes.
    p = {"hier_reduce_reduce",
         {node(StepOp::Reduce, Part::Whole, root_local), rail(StepOp::Reduce, Part::Whole, root_node, root_local)}};
    return p;
  } else {
    // Large: every rail reduces 1/L of the data to the root's node, whose ranks hand their
    // shards to the root.
    p = {"hier_rs_reduce_gather",
         {node(StepOp::ReduceScatter, Part::Shard), rail(StepOp::Reduce, Part::Shard, root_node),
          node(StepOp::Gather, Part::Shard, root_local, root_node)}};
    chunk(p, count, elem_bytes, static_cast<size_t>(per_node), t);
    return p;
  }
  if (bytes > t.latency_max_bytes) chunk(p, count, elem_bytes, 1, t);
  return p;
}

}  // namespace

HierPlan plan_hier(Collective coll, size_t count, size_t elem_bytes, const NodeLayout& layout, const RailPlan& rails,
                   int root, const HierTuning& tuning) {
  if (layout.world() == 0) throw InvalidArgument("plan_hier: empty group");
  size_t bytes = count * elem_bytes;
  switch (coll) {
    case Collective::AllReduce: return all_reduce(count, bytes, elem_bytes, layout, rails, tuning);
    case Collective::ReduceScatter:
    case Collective::AllGather: {
      HierPlan p = coll == Collective::ReduceScatter ? reduce_scatter_rule(layout, rails) : all_gather_rule(layout, rails);
      // Chunks cut every rank's block alike, so the network step of one chunk overlaps the
      // node step of the next, as for all_reduce.
      if (bytes * static_cast<size_t>(layout.world()) > tuning.latency_max_bytes) chunk(p, count, elem_bytes, 1, tuning);
      return p;
    }
    case Collective::Broadcast: return broadcast(count, bytes, elem_bytes, layout, rails, root, tuning);
    case Collective::Reduce: return reduce(count, bytes, elem_bytes, layout, rails, root, tuning);
    case Collective::Barrier:
      if (layout.num_nodes() == 1) return {"node_barrier", {node(StepOp::Barrier, Part::Whole)}};
      return {"hier_barrier",
              {node(StepOp::Barrier, Part::Whole), rail(StepOp::Barrier, Part::Whole, 0, 0),
               node(StepOp::Barrier, Part::Whole)}};
    default:  // point-to-point and all-to-all take their own routes, not a hierarchical plan
      break;
  }
  throw InvalidArgument("plan_hier: no hierarchical plan for " + std::string(to_string(coll)));
}

}  // namespace actorcc::topology
