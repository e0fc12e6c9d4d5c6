#include "backends/hier/gpu_hier_schedule.hpp"

#include <algorithm>

#include "actorcc/error.hpp"

namespace actorcc::hier {

bool rules_serve(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::AllGather ||
         c == Collective::Broadcast || c == Collective::Barrier;
}

Rule rule_for(Collective coll, const std::string& p) {
  switch (coll) {
    case Collective::AllReduce:
      if (p == "rail_all_reduce") return Rule::RailAllReduce;
      if (p == "hier_rs_ar_ag") return Rule::RsArAg;
      if (p == "hier_reduce_ar_bcast" || p == "leaders_reduce_ar_bcast") return Rule::ReduceArBcast;
      break;
    case Collective::ReduceScatter:
      if (p == "rail_reduce_scatter") return Rule::RailReduceScatter;
      if (p == "hier_rs_rs") return Rule::RsRs;
      if (p == "leaders_reduce_ar_scatter") return Rule::LeadersReduceScatter;
      break;
    case Collective::AllGather:
      if (p == "rail_all_gather") return Rule::RailAllGather;
      if (p == "hier_ag_ag") return Rule::AgAg;
      if (p == "leaders_gather_ag_bcast") return Rule::LeadersAllGather;
      break;
    case Collective::Broadcast:
      if (p == "rail_broadcast") return Rule::RailBroadcast;
      if (p == "hier_rail_bcast_node_bcast") return Rule::RailBcastNodeBcast;
      if (p == "hier_scatter_bcast_ag") return Rule::ScatterBcastAg;
      if (p == "leaders_bcast") return Rule::LeadersBroadcast;
      break;
    case Collective::Barrier:
      if (p == "hier_barrier") return Rule::Barrier;
      break;
    default: break;
  }
  throw Error(ErrorCode::Internal, "the GPU hierarchical rules have no rule for plan '" + p + "' of " +
                                       std::string(to_string(coll)));
}

std::vector<std::pair<size_t, size_t>> cut_chunks(size_t total, size_t plan_chunk, size_t fit, size_t align) {
  align = std::max<size_t>(1, align);
  size_t cap = std::max<size_t>(1, fit);
  if (plan_chunk) cap = std::min(cap, plan_chunk);
  cap = std::max(align, cap / align * align);
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t c0 = 0; c0 < total; c0 += cap) out.emplace_back(c0, std::min(cap, total - c0));
  return out;
}

std::vector<PipeOp> pipeline_schedule(size_t C, int depth, int stages) {
  const size_t D = static_cast<size_t>(std::max(1, depth));
  const bool three = stages == 3;
  std::vector<PipeOp> ops;
  auto run = [&](int stage, size_t c) { ops.push_back({PipeOp::Run, stage, c, static_cast<int>(c % D), 0}); };
  auto rec = [&](int stage, int ev, size_t c) { ops.push_back({PipeOp::Record, stage, 0, static_cast<int>(c % D), ev}); };
  auto wait = [&](int stage, int ev, size_t c) { ops.push_back({PipeOp::Wait, stage, 0, static_cast<int>(c % D), ev}); };
  // With three stages (node, rail, node) stage 2 of chunk c is launched after stage 0 of
  // chunk c + D - 1, so the first stream keeps D chunks in flight; the slot is then free for
  // chunk c + D by stream order. With two stages the slot's reuse waits for stage 1's event.
  for (size_t t = 0; t < C + (three ? D - 1 : 0); ++t) {
    if (t < C) {
      if (!three && t >= D) wait(0, 1, t);
      run(0, t);
      rec(0, 0, t);
      wait(1, 0, t);
      run(1, t);
      rec(1, 1, t);
    }
    if (three && t + 1 >= D && t + 1 - D < C) {
      wait(2, 1, t + 1 - D);
      run(2, t + 1 - D);
    }
  }
  return ops;
}

}  // namespace actorcc::hier
