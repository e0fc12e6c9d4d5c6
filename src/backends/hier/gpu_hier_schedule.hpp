// The host-side logic of the GPU hierarchical rules, kept apart from the CUDA calls so unit
// tests can check it on the CPU: which rule serves each plan of topology::plan_hier, how a
// message is cut into chunks, and the order of stage launches and event waits that pipelines
// the chunks over the node stream and the rail stream.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "actorcc/types.hpp"

namespace actorcc::hier {

// The collectives the rules serve (the rest go to flat NCCL: gpu_hier_backend_cuda.cpp).
bool rules_serve(Collective c);

// One GPU rule per plan name of topology::plan_hier.
enum class Rule {
  RailAllReduce, ReduceArBcast, RsArAg,                    // all_reduce
  RailReduceScatter, RsRs, LeadersReduceScatter,           // reduce_scatter
  RailAllGather, AgAg, LeadersAllGather,                   // all_gather
  RailBroadcast, RailBcastNodeBcast, ScatterBcastAg, LeadersBroadcast,  // broadcast
  Barrier,
};
// The rule for `plan` (a plan_hier name) of `coll`; throws Error(Internal) for a name the GPU
// rules do not know, so a new planner rule cannot silently take another's path.
Rule rule_for(Collective coll, const std::string& plan);

// [offset, length) chunks covering [0, total): each at most `cap` elements (the plan's chunk
// where it sets one, never more than `fit`, what one scratch slot holds) and a multiple of
// `align` (the ranks of a node, for sharded rules; the caller sends `total` as a multiple).
std::vector<std::pair<size_t, size_t>> cut_chunks(size_t total, size_t plan_chunk, size_t fit, size_t align);

// The pipeline: stages alternate between two streams (stage 0 and 2 on the first, 1 on the
// other). Stage s of a chunk waits for stage s - 1 of it; a chunk's scratch slot (chunk % D)
// is reused D chunks later, after the last stage of the chunk before has run.
struct PipeOp {
  enum Kind { Run, Record, Wait } kind;
  int stage = 0;       // Run: the stage; Record / Wait: on the stream of this stage
  size_t chunk = 0;    // Run
  int slot = 0;        // Run: the scratch slot; Record / Wait: the event's slot
  int event = 0;       // Record / Wait: 0 = after stage 0, 1 = after stage 1
};
std::vector<PipeOp> pipeline_schedule(size_t chunks, int depth, int stages);

}  // namespace actorcc::hier
