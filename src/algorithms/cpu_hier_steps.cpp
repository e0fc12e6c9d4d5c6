// Node-scope steps stage their part in the node's shared-memory slots (one round, one sync
// point, so the two-buffer protocol of shm_group.hpp holds); rail-scope steps exchange with
// every other rail member at once over TCP (ring shifts, both directions per exchange) and
// reduce in node order. Rails are short (one member per node), so sending each member its
// part directly costs (N-1)/N of the data per member, as a ring would, in one latency.
#include "algorithms/cpu_hier_steps.hpp"

#include <cstring>

#include "actorcc/error.hpp"
#include "reduce/host_reduce.hpp"

namespace actorcc::cpu {

using topology::Part;
using topology::Scope;
using topology::Step;
using topology::StepOp;

Ranges part_ranges(const HierGroup& g, Part part, int rank, const Chunk& c) {
  Ranges out;
  auto block = [&](int b) { out.emplace_back(static_cast<size_t>(b) * c.block + c.c0, c.cn); };
  const auto& l = g.layout;
  switch (part) {
    case Part::Whole:
      for (int b = 0; b < c.blocks; ++b) block(b);
      break;
    case Part::Shard: {
      auto [off, len] = topology::shard_range(c.cn, static_cast<int>(l.nodes[l.node_of[rank]].size()), l.local_index[rank]);
      out.emplace_back(c.c0 + off, len);
      break;
    }
    case Part::OwnBlock: block(rank); break;
    case Part::RailBlocks:
      for (int q : g.rails.rails.at(g.rails.rail_of.at(rank))) block(q);
      break;
    case Part::NodeBlocks:
      for (int q : l.nodes[l.node_of[rank]]) block(q);
      break;
  }
  return out;
}

namespace {

size_t elems(const Ranges& r) {
  size_t n = 0;
  for (auto& [o, len] : r) n += len;
  return n;
}
void pack(uint8_t* dst, const uint8_t* buf, const Ranges& r, size_t es) {
  for (auto& [o, len] : r) {
    std::memcpy(dst, buf + o * es, len * es);
    dst += len * es;
  }
}
void unpack(uint8_t* buf, const uint8_t* src, const Ranges& r, size_t es) {
  for (auto& [o, len] : r) {
    std::memcpy(buf + o * es, src, len * es);
    src += len * es;
  }
}

void node_step(HierGroup& g, const Step& s, uint8_t* buf, const Chunk& c, DataType dt, RedOp op) {
  ShmGroup& shm = *g.node;
  if (s.op == StepOp::Barrier) return shm.sync("barrier");
  const auto& members = g.layout.nodes[g.layout.node_of[g.rank]];
  const int n = static_cast<int>(members.size()), me = shm.me();
  const size_t es = dtype_size(dt);
  std::vector<Ranges> r(n);
  std::vector<size_t> off(n + 1, 0);
  for (int m = 0; m < n; ++m) {
    r[m] = part_ranges(g, s.part, members[m], c);
    off[m + 1] = off[m] + elems(r[m]);
  }
  const bool each_own = s.op == StepOp::ReduceScatter || s.op == StepOp::Scatter;  // distinct parts, all staged
  const size_t staged = each_own ? off[n] : elems(r[s.op == StepOp::AllGather || s.op == StepOp::Gather ? me : s.root]);
  if (staged * es > shm.buffer_bytes())
    throw Error(ErrorCode::Internal, "hierarchical step larger than the shared-memory buffer", g.rank);
  const uint64_t round = shm.next_round();
  uint8_t* slot = shm.buffer(me, round);
  const bool root = me == s.root;
  std::vector<uint8_t> tmp;
  switch (s.op) {
    case StepOp::AllReduce:
    case StepOp::ReduceScatter:
    case StepOp::Reduce: {
      int target = s.op == StepOp::Reduce ? s.root : me;  // whose part this rank reduces
      if (each_own)
        for (int m = 0; m < n; ++m) pack(slot + off[m] * es, buf, r[m], es);
      else
        pack(slot, buf, r[s.op == StepOp::Reduce ? s.root : me], es);
      shm.sync(to_string(s.op));
      if (s.op == StepOp::Reduce && !root) return;
      std::vector<const void*> ins(n);
      size_t at = each_own ? off[target] * es : 0;
      for (int p = 0; p < n; ++p) ins[p] = shm.buffer(p, round) + at;
      tmp.resize(elems(r[target]) * es);
      reduce_n(tmp.data(), ins.data(), n, elems(r[target]), dt, op);
      unpack(buf, tmp.data(), r[target], es);
      return;
    }
    case StepOp::AllGather:
    case StepOp::Gather:
      pack(slot, buf, r[me], es);
      shm.sync(to_string(s.op));
      if (s.op == StepOp::Gather && !root) return;
      for (int j = 0; j < n; ++j)
        if (j != me) unpack(buf, shm.buffer(j, round), r[j], es);
      return;
    case StepOp::Broadcast:
    case StepOp::Scatter:
      if (root) {
        if (each_own)
          for (int m = 0; m < n; ++m) pack(slot + off[m] * es, buf, r[m], es);
        else
          pack(slot, buf, r[s.root], es);
      }
      shm.sync(to_string(s.op));
      if (!root) unpack(buf, shm.buffer(s.root, round) + (each_own ? off[me] * es : 0), r[me], es);
      return;
    case StepOp::Barrier: break;
  }
}

void rail_step(HierGroup& g, const Step& s, uint8_t* buf, const Chunk& c, DataType dt, RedOp op, uint64_t tag) {
  const auto& members = g.rails.rails.at(g.rails.rail_of[g.rank]);
  const int n = static_cast<int>(members.size()), me = g.layout.node_of[g.rank];
  const size_t es = dtype_size(dt);
  auto pair = [&](int m) { return &g.mesh->pair(members[m]); };
  auto deadline = [&] { return Deadline::after(g.timeout); };
  std::vector<Ranges> r(n);
  for (int m = 0; m < n; ++m) r[m] = part_ranges(g, s.part, members[m], c);
  auto packed = [&](const Ranges& rr) {
    std::vector<uint8_t> v(elems(rr) * es);
    pack(v.data(), buf, rr, es);
    return v;
  };
  // This member's part reduced from every member's data there (from[k]: node k's), in node
  // order: the same inputs in the same order wherever a rail reduces.
  auto reduce_mine = [&](const std::vector<std::vector<uint8_t>>& from) {
    std::vector<const void*> ins(n);
    for (int k = 0; k < n; ++k) ins[k] = from[k].data();
    std::vector<uint8_t> res(from[me].size());
    reduce_n(res.data(), ins.data(), n, elems(r[me]), dt, op);
    unpack(buf, res.data(), r[me], es);
  };
  switch (s.op) {
    case StepOp::Barrier:
      for (int k = 1; k < n; ++k)
        tcp::exchange(pair((me + k) % n), nullptr, 0, pair((me - k + n) % n), nullptr, 0, tag, deadline(), g.abort, g.call);
      return;
    case StepOp::AllReduce:
    case StepOp::ReduceScatter: {
      // Every member sends member j the data at j's part and reduces its own part from all,
      // in node order: the same inputs in the same order on every member of the rail.
      std::vector<std::vector<uint8_t>> from(n);
      from[me] = packed(r[me]);
      for (int k = 1; k < n; ++k) {
        int to = (me + k) % n, src = (me - k + n) % n;
        auto out = packed(r[to]);
        from[src].resize(from[me].size());
        tcp::exchange(pair(to), out.data(), out.size(), pair(src), from[src].data(), from[src].size(), tag, deadline(), g.abort, g.call);
      }
      reduce_mine(from);
      return;
    }
    case StepOp::Reduce: {
      // The members send the root their data at its part, all at once; the root reduces in
      // node order, as AllReduce does.
      if (me != s.root) {
        auto out = packed(r[s.root]);
        pair(s.root)->send(out.data(), out.size(), tag, deadline(), g.abort);
        return;
      }
      std::vector<std::vector<uint8_t>> from(n);
      from[me] = packed(r[me]);
      std::vector<tcp::Transfer> xs;
      for (int m = 0; m < n; ++m)
        if (m != me) {
          from[m].resize(from[me].size());
          xs.push_back({pair(m), false, from[m].data(), from[m].size(), tag});
        }
      tcp::transfer(xs, deadline(), g.abort);
      reduce_mine(from);
      return;
    }
    case StepOp::AllGather: {
      auto mine = packed(r[me]);
      for (int k = 1; k < n; ++k) {
        int to = (me + k) % n, src = (me - k + n) % n;
        std::vector<uint8_t> in(elems(r[src]) * es);
        tcp::exchange(pair(to), mine.data(), mine.size(), pair(src), in.data(), in.size(), tag, deadline(), g.abort, g.call);
        unpack(buf, in.data(), r[src], es);
      }
      return;
    }
    case StepOp::Broadcast: {
      // Every receiver answers with an empty frame, sent as it enters the step (so it costs the
      // root no round trip), carrying its call: a root that only sent would never compare its
      // call with anyone's, and two ranks that disagree on the root would both send and finish.
      if (me == s.root) {
        std::vector<std::vector<uint8_t>> out(n);
        std::vector<tcp::Transfer> xs;
        for (int m = 0; m < n; ++m) {
          if (m == me) continue;
          out[m] = packed(r[m]);
          xs.push_back({pair(m), true, out[m].data(), out[m].size(), tag, g.call});
          xs.push_back({pair(m), false, nullptr, 0, tag, g.call});
        }
        tcp::transfer(xs, deadline(), g.abort);
      } else {
        std::vector<uint8_t> in(elems(r[me]) * es);
        tcp::exchange(pair(s.root), nullptr, 0, pair(s.root), in.data(), in.size(), tag, deadline(), g.abort, g.call);
        unpack(buf, in.data(), r[me], es);
      }
      return;
    }
    default:
      throw Error(ErrorCode::Internal, std::string("rail step ") + to_string(s.op) + " is not implemented", g.rank);
  }
}

}  // namespace

void run_step(HierGroup& g, const Step& s, uint8_t* buf, const Chunk& c, DataType dtype, RedOp op, uint64_t tag) {
  if (s.scope == Scope::Node) {
    if (s.only != Step::kEvery && s.only != g.layout.node_of[g.rank]) return;
    return node_step(g, s, buf, c, dtype, op);
  }
  int rail = g.rails.rail_of[g.rank];
  if (rail < 0 || (s.only != Step::kEvery && s.only != rail)) return;
  rail_step(g, s, buf, c, dtype, op, tag);
}

}  // namespace actorcc::cpu
