#include "algorithms/cpu_hier.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "actorcc/error.hpp"
#include "algorithms/cpu_hier_steps.hpp"
#include "reduce/host_reduce.hpp"

namespace actorcc::cpu {
namespace {

bool is_float(DataType t) { return t <= DataType::Float64; }  // Float32, Float16, BFloat16, Float64

// The planner's plan, with chunks no larger than a node step can stage in one
// shared-memory buffer (a step stages at most one chunk of every block).
topology::HierPlan plan_for(const HierGroup& g, Collective coll, size_t count, size_t es, int root) {
  const int blocks = coll == Collective::ReduceScatter || coll == Collective::AllGather ? g.layout.world() : 1;
  const size_t cap = std::max<size_t>(1, g.node->buffer_bytes() / (es * static_cast<size_t>(blocks)));
  topology::HierTuning t;
  t.chunk_bytes = cap * es;
  topology::HierPlan p = topology::plan_hier(coll, count, es, g.layout, g.rails, root, t);
  if ((p.chunk_elems == 0 && count > cap) || p.chunk_elems > cap) p.chunk_elems = cap;
  if (p.chunk_elems) p.num_chunks = (count + p.chunk_elems - 1) / p.chunk_elems;
  return p;
}

void run_plan(HierGroup& g, const topology::HierPlan& p, uint8_t* buf, size_t block, int blocks, DataType dt, RedOp op) {
  const size_t chunk = p.chunk_elems ? p.chunk_elems : block;
  uint64_t step = 0;
  for (size_t c0 = 0; c0 < block; c0 += chunk) {
    Chunk c{block, blocks, c0, std::min(chunk, block - c0)};
    // Tags carry the call and the step: a rank that runs another call or step is named.
    for (const auto& s : p.steps) run_step(g, s, buf, c, dt, op, (g.calls << 24) + step++);
  }
}

// Float Avg: the plan summed; divide once, in float32 for float32 and the half types.
void divide(void* buf, size_t count, DataType dt, int n) {
  for (size_t i = 0; i < count; ++i) {
    double v = load_as_double(buf, i, dt);
    double q = dt == DataType::Float64 ? v / n : static_cast<double>(static_cast<float>(v) / static_cast<float>(n));
    store_from_double(buf, i, q, dt);
  }
}

// Integer Avg, exactly as the flat path: every input everywhere, reduced in rank order.
void integer_avg(HierGroup& g, const CollArgs& a) {
  const int w = g.layout.world();
  const size_t es = dtype_size(a.dtype);
  const size_t in_elems = a.coll == Collective::ReduceScatter ? a.count * w : a.count;
  std::vector<uint8_t> all(in_elems * w * es);
  std::memcpy(all.data() + g.rank * in_elems * es, a.send, in_elems * es);
  run_plan(g, plan_for(g, Collective::AllGather, in_elems, es, 0), all.data(), in_elems, w, a.dtype, RedOp::Sum);
  const size_t at = a.coll == Collective::ReduceScatter ? g.rank * a.count * es : 0;
  std::vector<const void*> ins(w);
  for (int p = 0; p < w; ++p) ins[p] = all.data() + p * in_elems * es + at;
  reduce_n(a.recv, ins.data(), w, a.count, a.dtype, RedOp::Avg);
}

}  // namespace

std::string hier_route(const HierGroup& g, Collective coll, size_t count, size_t elem_bytes, int root) {
  return plan_for(g, coll, count, std::max<size_t>(1, elem_bytes), root).name;
}

bool hier_serves(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::AllGather ||
         c == Collective::Broadcast || c == Collective::Barrier;
}

void hier_collective(HierGroup& g, const CollArgs& a) {
  ++g.calls;
  const int w = g.layout.world();
  const size_t es = dtype_size(a.dtype);
  if (a.coll == Collective::Barrier) {
    run_plan(g, plan_for(g, a.coll, 1, 1, 0), nullptr, 1, 1, DataType::UInt8, RedOp::Sum);
    return;
  }
  if (a.count == 0) return;
  const bool reduces = a.coll == Collective::AllReduce || a.coll == Collective::ReduceScatter;
  if (reduces && a.op == RedOp::Avg && !is_float(a.dtype)) return integer_avg(g, a);
  const RedOp op = a.op == RedOp::Avg ? RedOp::Sum : a.op;
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  const auto plan = plan_for(g, a.coll, a.count, es, a.root);
  switch (a.coll) {
    case Collective::AllReduce:
      if (recv != send) std::memcpy(recv, send, a.count * es);
      run_plan(g, plan, recv, a.count, 1, a.dtype, op);
      break;
    case Collective::Broadcast:
      if (g.rank == a.root && recv != send) std::memcpy(recv, send, a.count * es);
      run_plan(g, plan, recv, a.count, 1, a.dtype, op);
      break;
    case Collective::ReduceScatter: {
      // The plan reduces in a full-size copy of the input; the caller's output is one block.
      std::vector<uint8_t> work(send, send + a.count * w * es);
      run_plan(g, plan, work.data(), a.count, w, a.dtype, op);
      std::memcpy(recv, work.data() + g.rank * a.count * es, a.count * es);
      break;
    }
    case Collective::AllGather:
      if (send != recv + g.rank * a.count * es) std::memmove(recv + g.rank * a.count * es, send, a.count * es);
      run_plan(g, plan, recv, a.count, w, a.dtype, op);
      break;
    default: break;  // Barrier above; the rest are refused by hier_serves
  }
  if (reduces && a.op == RedOp::Avg) divide(recv, a.count, a.dtype, w);
}

}  // namespace actorcc::cpu
