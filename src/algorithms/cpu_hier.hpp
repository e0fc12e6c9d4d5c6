// Hierarchical CPU collectives for groups that span nodes: the steps of a plan from
// topology/rails.hpp, node-scope steps on the node's shared-memory group (transport/shm),
// rail-scope steps over the TCP transport with the rank's rail peers (transport/tcp).
//
// Each collective runs on a work buffer with one block per rank (reduce_scatter /
// all_gather) or one block (all_reduce / broadcast), chunk by chunk, the steps of the plan in
// order for each chunk. Every element's result is computed in one place, or by every rail
// member in node order from the same inputs, and then copied, so all ranks end bitwise
// identical. Avg runs as Sum and divides once at the end (as the flat path rounds once);
// integer Avg, whose partial sums could wrap in the element type, all-gathers the inputs and
// reduces them locally in rank order, exactly.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "group/group_context.hpp"
#include "algorithms/cpu_hier_overlap.hpp"
#include "topology/rails.hpp"
#include "transport/shm/shm_group.hpp"
#include "transport/tcp/mesh.hpp"

namespace actorcc::cpu {

struct HierGroup {
  int rank = 0;
  topology::NodeLayout layout;
  topology::RailPlan rails;
  ShmGroup* node = nullptr;  // this rank's node
  tcp::Mesh* mesh = nullptr; // every rank on another node (rail steps use the rail peers)
  NetHelper* helper = nullptr;  // runs the network side beside the node side
  const AbortSignal* abort = nullptr;
  // Fails the group for every rank with this cause (the bootstrap's abort): both sides of a
  // call, and the other nodes, stop at once.
  std::function<void(const std::exception&)> fail_group;
  std::chrono::milliseconds timeout{0};  // bound of each network step
  uint64_t calls = 0;                    // collectives so far: tags every network message
  // The collective call in progress: every network frame carries it and the receiver compares
  // it with its own (ranks on different nodes that disagree), as the node's shm flag blocks do
  // inside a node (ShmGroup::begin_call).
  CallDesc call{};
};

// The route the planner picks for `coll` (for Communicator::plan and logs).
std::string hier_route(const HierGroup& g, Collective coll, size_t count, size_t elem_bytes, int root);

// The collectives the hierarchical plans carry: all_reduce, reduce_scatter, all_gather,
// broadcast, barrier and reduce (rooted: reduced toward the root's node, agreeing bitwise
// with all_reduce).
bool hier_serves(Collective c);

// g.call must hold CallDesc::of(a), and g.node->begin_call(g.call) must have been made.
void hier_collective(HierGroup& g, const CollArgs& a);

// Send, Recv, SendRecv batches, all_to_all(_v), gather, scatter (algorithms/p2p_plan.hpp):
// the messages between ranks of one node go over its shm channels, the others over the TCP
// mesh, both at once (the TCP side on the helper thread). A message's size and type are
// checked by its receiver, as on one host.
void hier_send_recv(HierGroup& g, const CollArgs& a);

}  // namespace actorcc::cpu
