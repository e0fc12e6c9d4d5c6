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

// The plan's steps as node steps, then rail steps, then node steps (every pipelined rule
// has that shape); false for a plan of another shape, which then runs chunk after chunk.
bool split_phases(const topology::HierPlan& p, size_t* rail_begin, size_t* rail_end) {
  size_t i = 0, n = p.steps.size();
  while (i < n && p.steps[i].scope == topology::Scope::Node) ++i;
  size_t j = i;
  while (j < n && p.steps[j].scope == topology::Scope::Rail) ++j;
  for (size_t k = j; k < n; ++k)
    if (p.steps[k].scope != topology::Scope::Node) return false;
  *rail_begin = i;
  *rail_end = j;
  return i < j;
}

void run_plan(HierGroup& g, const topology::HierPlan& p, uint8_t* buf, size_t block, int blocks, DataType dt, RedOp op) {
  const size_t chunk = p.chunk_elems ? p.chunk_elems : block;
  std::vector<Chunk> chunks;
  for (size_t c0 = 0; c0 < block; c0 += chunk) chunks.push_back({block, blocks, c0, std::min(chunk, block - c0)});
  // Tags carry the call and the step: a rank that runs another call or step is named.
  const uint64_t nsteps = p.steps.size();
  auto steps = [&](size_t k, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) run_step(g, p.steps[i], buf, chunks[k], dt, op, (g.calls << 24) + k * nsteps + i);
  };
  size_t rb = 0, re = 0;
  const size_t depth = static_cast<size_t>(std::max(1, p.pipeline_depth));
  if (chunks.size() < 2 || depth < 2 || !g.helper || !split_phases(p, &rb, &re)) {
    for (size_t k = 0; k < chunks.size(); ++k) steps(k, 0, nsteps);
    return;
  }
  // Pipelined: the rail steps of chunk k run on the helper thread while this thread runs the
  // node steps of the next chunks, up to `depth` chunks in flight. Node steps keep one order
  // on every rank of a node (before(k), then after(k - depth + 1)), rail steps one order on
  // every rank of a rail (chunk order, one thread), and chunks are disjoint ranges of the
  // work buffer, so the two threads never touch the same bytes.
  Overlap o(*g.helper, g.fail_group);
  std::vector<uint64_t> ticket(chunks.size());
  size_t done = 0;  // chunks whose node steps after the rails have run
  for (size_t k = 0; k < chunks.size(); ++k) {
    o.here([&] { steps(k, 0, rb); });
    ticket[k] = o.post([&steps, k, rb, re] { steps(k, rb, re); });
    for (; done + depth <= k + 1; ++done) {
      o.wait(ticket[done]);
      o.here([&] { steps(done, re, nsteps); });
    }
  }
  for (; done < chunks.size(); ++done) {
    o.wait(ticket[done]);
    o.here([&] { steps(done, re, nsteps); });
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
         c == Collective::Broadcast || c == Collective::Barrier || c == Collective::Reduce;
}

void hier_collective(HierGroup& g, const CollArgs& a) {
  if (a.coll == Collective::Reduce && a.op == RedOp::Avg && !is_float(a.dtype)) {
    // Integer Avg gathers every input everywhere anyway: an all_reduce that only the root keeps.
    std::vector<uint8_t> scratch(g.rank == a.root ? 0 : a.count * dtype_size(a.dtype));
    CollArgs b = a;
    b.coll = Collective::AllReduce;
    if (g.rank != a.root) b.recv = scratch.data();
    return hier_collective(g, b);
  }
  ++g.calls;
  const int w = g.layout.world();
  const size_t es = dtype_size(a.dtype);
  // A call with nothing to move still meets its peers once, as a barrier carrying its
  // descriptor: otherwise a rank whose peers made another call would go on unnoticed.
  if (a.coll == Collective::Barrier || a.count == 0) {
    run_plan(g, plan_for(g, Collective::Barrier, 1, 1, 0), nullptr, 1, 1, DataType::UInt8, RedOp::Sum);
    return;
  }
  const bool reduces = a.coll == Collective::AllReduce || a.coll == Collective::ReduceScatter;
  if (reduces && a.op == RedOp::Avg && !is_float(a.dtype)) return integer_avg(g, a);
  const bool is_root = g.rank == a.root;
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
    case Collective::Reduce: {
      // The plan reduces in place in a work buffer: the root's output, a copy elsewhere (the
      // caller's recv may be absent off the root, and its send must stay as it was).
      std::vector<uint8_t> work(is_root ? 0 : a.count * es);
      uint8_t* buf = is_root ? recv : work.data();
      if (buf != send) std::memcpy(buf, send, a.count * es);
      run_plan(g, plan, buf, a.count, 1, a.dtype, op);
      break;
    }
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
  if ((reduces || (a.coll == Collective::Reduce && is_root)) && a.op == RedOp::Avg) divide(recv, a.count, a.dtype, w);
}

}  // namespace actorcc::cpu
