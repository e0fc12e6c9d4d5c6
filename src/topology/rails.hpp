// Rails and the hierarchical plan: how a group that spans nodes is cut into a node part
// (actorcc's own transports: NVLink or shm) and a network part (NCCL or TCP), and which steps
// each hierarchical collective runs. Pure logic: no sockets, no devices, no environment.
//
// A rail is the set of ranks, one per node, that share a local index. With equal ranks per
// node there is one rail per local index, and every network communicator holds exactly one
// rank of each node: NCCL (or TCP) never sees two ranks of one node, so it never runs its
// intra-node P2P/SHM/NVLS paths, which are what stall and hang for actors. With unequal ranks
// per node there is no such cut; the fallback is one rail of node leaders (local index 0),
// with the rest of each node reducing into and receiving from its leader.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "actorcc/communicator.hpp"

namespace actorcc::topology {

// Who is on which node. Nodes are numbered by first appearance in rank order and local
// indices run in rank order inside a node (the same rule as assign_nodes), so every rank
// computes the same layout from the same peer table, whatever the rank placement.
struct NodeLayout {
  std::vector<int> node_of;             // rank -> node
  std::vector<int> local_index;         // rank -> index among the ranks of its node
  std::vector<std::vector<int>> nodes;  // node -> its ranks, in rank order

  int world() const { return static_cast<int>(node_of.size()); }
  int num_nodes() const { return static_cast<int>(nodes.size()); }
  bool equal_nodes() const;  // every node holds the same number of ranks
  int ranks_per_node() const;  // the common count; -1 when nodes differ
};

// From a peer table as the bootstrap delivers it (node and local_rank need not be filled).
NodeLayout node_layout(std::vector<PeerInfo> peers);
// From one node name per rank (host ids, ACTORCC_NODE_ID values): tests and tools.
NodeLayout node_layout(const std::vector<std::string>& host_ids);

struct RailPlan {
  enum class Shape { PerLocalIndex, NodeLeaders };
  Shape shape = Shape::PerLocalIndex;
  // rails[k]: the ranks of rail k, one per node, in node order. PerLocalIndex: rail k holds
  // local index k of every node. NodeLeaders: one rail, the first rank of each node.
  std::vector<std::vector<int>> rails;
  std::vector<int> rail_of;  // rank -> its rail, -1 for a rank in no rail (NodeLeaders)
  std::string note;          // why the fallback was taken (empty for PerLocalIndex)
};
RailPlan plan_rails(const NodeLayout& layout);

// [offset, offset + length) of part `index` when `count` elements are cut into `parts` parts
// as evenly as possible (the first count % parts parts one longer). Odd sizes are why.
std::pair<size_t, size_t> shard_range(size_t count, int parts, int index);

// ---- the planner's rules for hierarchical collectives ----

enum class Scope { Node, Rail };
enum class StepOp { ReduceScatter, AllReduce, AllGather, Reduce, Broadcast, Scatter, Gather, Barrier };
const char* to_string(Scope s);
const char* to_string(StepOp o);

// What part of the data a step works on.
//  Whole:     the whole chunk.
//  Shard:     this rank's 1/L shard of the chunk (shard_range by local index).
// reduce_scatter / all_gather (the buffer holds one block per rank, by rank):
//  OwnBlock:  this rank's block.
//  RailBlocks: the blocks of the ranks of this rank's rail (one per node).
//  NodeBlocks: the blocks of the ranks of this rank's node.
// A step's rule, over the members of its scope: reducing ops leave at each member's part the
// reduction of every member's data there; gathering ops copy each member's part to the
// others (or the root); rooted ops do the same with the root alone.
enum class Part { Whole, Shard, OwnBlock, RailBlocks, NodeBlocks };
const char* to_string(Part p);

struct Step {
  Scope scope;
  StepOp op;
  Part part;
  // Reduce / Broadcast / Scatter / Gather: the root, as a local index (Node scope) or a node
  // index (Rail scope).
  int root = 0;
  // kEvery: every node (Node scope) or every rail (Rail scope) runs the step; else the one
  // node or rail that does (the others skip it).
  int only = kEvery;
  static constexpr int kEvery = -1;
  bool operator==(const Step&) const = default;
};
std::string to_string(const Step& s);

// Sizes the planner's rules turn on (the backend passes the table's values).
struct HierTuning {
  size_t latency_max_bytes = size_t{256} << 10;  // at or below: the latency path
  size_t chunk_bytes = size_t{4} << 20;         // pipelined chunk, large messages
  int pipeline_depth = 2;                        // chunks in flight (node step of k+1 overlaps rail step of k)
};

struct HierPlan {
  std::string name;          // route name for logs and the bench ("hier_rs_ar_ag", ...)
  std::vector<Step> steps;   // run in order for each chunk
  size_t chunk_elems = 0;    // elements per chunk (the last one may be shorter); 0: one chunk
  size_t num_chunks = 1;
  int pipeline_depth = 1;    // 1: chunks strictly one after another
};

// The plan for `coll` on `count` elements of `elem_bytes` each (per-rank block for
// reduce_scatter and all_gather; the whole buffer otherwise). `root` is the broadcast root.
// Every rank computes the same plan from the same arguments.
HierPlan plan_hier(Collective coll, size_t count, size_t elem_bytes, const NodeLayout& layout, const RailPlan& rails,
                   int root = 0, const HierTuning& tuning = {});

}  // namespace actorcc::topology
