// Each rule of plan_hier as GPU work. Shapes (L ranks per node, N nodes, k = local index,
// n = node index, m = per-rank block of reduce_scatter / all_gather):
//  - sharded rules cut each chunk into L equal shards (chunks are multiples of L; the few
//    elements of a message that do not split evenly take the latency rule);
//  - reduce_scatter / all_gather reorder blocks in scratch so that each node step sees its
//    ranks' parts contiguously (the CUDA backend's reduce_scatter and all_gather split a buffer
//    by local index, the rails by node);
//  - Avg runs as Sum and divides once at the end, as the CPU hierarchical path does.
// Every element is reduced in one place (a node step or one rail call) and then copied, so all
// ranks end bitwise identical.
#include "backends/hier/gpu_hier_rules.hpp"

#include <algorithm>
#include <string>

#include "backends/hier/gpu_divide.hpp"
#include "backends/hier/gpu_hier_schedule.hpp"

namespace actorcc::hier {

using cuda_rt::check;

namespace {

class Rules {
 public:
  Rules(GpuHier& g, const CollArgs& a)
      : g_(g), a_(a), es_(dtype_size(a.dtype)), op_(a.op == RedOp::Avg ? RedOp::Sum : a.op) {
    const auto& l = g.layout;
    n_ = l.node_of[g.rank];
    k_ = l.local_index[g.rank];
    L_ = static_cast<int>(l.nodes[n_].size());
    N_ = l.num_nodes();
    W_ = l.world();
    for (int q = 0; q < W_; ++q) everyone_.push_back(q);
  }

  void run(const topology::HierPlan& p) {
    const auto* send = static_cast<const uint8_t*>(a_.send);
    auto* recv = static_cast<uint8_t*>(a_.recv);
    const Rule rule = rule_for(a_.coll, p.name);
    int root_node = 0, root_local = 0;
    if (a_.coll == Collective::Broadcast) {
      root_node = g_.layout.node_of[a_.root];
      root_local = g_.layout.local_index[a_.root];
      if (g_.rank == a_.root && send != recv) {
        copy(recv, send, a_.count, g_.node_s);
        to_rail();  // the rail broadcast reads it
      }
    }
    switch (rule) {
      case Rule::RailAllReduce: return rail(Collective::AllReduce, send, recv, a_.count);
      case Rule::ReduceArBcast: return reduce_ar_bcast(send, recv, a_.count);
      case Rule::RsArAg: return rs_ar_ag(send, recv, a_.count, p);
      case Rule::RailReduceScatter: return rail(Collective::ReduceScatter, send, recv, a_.count);
      case Rule::RsRs: return rs_rs(send, recv, p);
      case Rule::LeadersReduceScatter: return leaders_rs(send, recv, p);
      case Rule::RailAllGather: return rail(Collective::AllGather, send, recv, a_.count);
      case Rule::AgAg: return ag_ag(send, recv, p);
      case Rule::LeadersAllGather: return leaders_ag(send, recv, p);
      case Rule::RailBroadcast: return rail(Collective::Broadcast, recv, recv, a_.count, root_node);
      case Rule::RailBcastNodeBcast: return rail_bcast_node_bcast(recv, 0, a_.count, root_node, root_local);
      case Rule::ScatterBcastAg: return scatter_bcast_ag(recv, p, root_node, root_local);
      case Rule::LeadersBroadcast: return leaders_bcast(recv, root_node, root_local);
      case Rule::Barrier:
        node(Collective::Barrier, nullptr, nullptr, 0);
        if (k_ == 0) {
          to_rail();
          rail_typed(Collective::AllReduce, g_.one, g_.one, 1, 0, DataType::Int32, RedOp::Sum);
          to_node();
        }
        return node(Collective::Barrier, nullptr, nullptr, 0);
    }
  }

 private:
  // ---- the two kinds of step ----
  void node(Collective c, const void* send, void* recv, size_t count, int root = 0) {
    CollArgs x{c, send, recv, count, a_.dtype, op_, root, g_.node_s};
    g_.node->run(x);
  }
  void rail(Collective c, const void* send, void* recv, size_t count, int root = 0) {
    rail_typed(c, send, recv, count, root, a_.dtype, op_);
  }
  void rail_typed(Collective c, const void* send, void* recv, size_t count, int root, DataType t, RedOp op) {
    if (!g_.rail) return;
    g_.rail->call(to_string(c).data(), g_.rail_s,
                  [&](nccl::NcclComm& comm) { comm.run(c, send, recv, count, t, op, root, g_.rail_s); });
  }
  void rail_transfers(const std::vector<nccl::NcclComm::Transfer>& xs) {
    if (!g_.rail) return;
    g_.rail->call("rail transfers", g_.rail_s, [&](nccl::NcclComm& comm) { comm.transfers(xs, g_.rail_s); });
  }
  void hand_over(cudaStream_t from, cudaStream_t to) {
    check(cudaEventRecord(g_.hop->get(), from), "cudaEventRecord", g_.rank);
    check(cudaStreamWaitEvent(to, g_.hop->get(), 0), "cudaStreamWaitEvent", g_.rank);
  }
  void to_rail() { hand_over(g_.node_s, g_.rail_s); }
  void to_node() { hand_over(g_.rail_s, g_.node_s); }
  void copy(void* dst, const void* src, size_t elems, cudaStream_t s) {
    if (elems) check(cudaMemcpyAsync(dst, src, elems * es_, cudaMemcpyDeviceToDevice, s), "hierarchical copy", g_.rank);
  }
  // Chunk [c0, c0 + cn) of the user's blocks (m elements each) to (or from) the scratch,
  // where the blocks of groups[0], then of groups[1], ... lie one after another (cn each).
  enum Dir { ToScratch, FromScratch };
  void move_blocks(Dir d, uint8_t* scratch, const uint8_t* user, const std::vector<std::vector<int>>& groups, size_t m,
                   size_t c0, size_t cn) {
    size_t at = 0;
    for (const auto& g : groups)
      for (int q : g) {
        uint8_t* s = scratch + bytes(at++ * cn);
        auto* u = const_cast<uint8_t*>(user) + bytes(q * m + c0);  // written only FromScratch (the output)
        d == ToScratch ? copy(s, u, cn, g_.node_s) : copy(u, s, cn, g_.node_s);
      }
  }
  uint8_t* slot(int s) { return g_.scratch + static_cast<size_t>(s) * g_.slot_bytes; }
  size_t bytes(size_t elems) const { return elems * es_; }

  // Chunks that fit a scratch slot at `per_elem_bytes` of scratch per chunk element.
  std::vector<std::pair<size_t, size_t>> chunks(size_t total, const topology::HierPlan& p, size_t per_elem_bytes,
                                                size_t align) {
    return cut_chunks(total, p.chunk_elems, g_.slot_bytes / std::max<size_t>(1, per_elem_bytes), align);
  }

  // Runs stage st[s] of each chunk in the order pipeline_schedule gives, with its event
  // records and waits (stages 0 and 2 on `s0`, stage 1 on `s1`).
  using StageFn = std::function<void(size_t, int)>;
  void pipeline(size_t C, int depth, cudaStream_t s0, cudaStream_t s1, const std::vector<StageFn>& st) {
    const int D = std::clamp(depth, 1, kMaxDepth);
    for (const PipeOp& op : pipeline_schedule(C, D, static_cast<int>(st.size()))) {
      cudaStream_t s = op.stage == 1 ? s1 : s0;
      cuda_rt::Event& e = op.event == 0 ? g_.ev0[op.slot] : g_.ev1[op.slot];
      switch (op.kind) {
        case PipeOp::Run: st[op.stage](op.chunk, op.slot); break;
        case PipeOp::Record: check(cudaEventRecord(e.get(), s), "cudaEventRecord", g_.rank); break;
        case PipeOp::Wait: check(cudaStreamWaitEvent(s, e.get(), 0), "cudaStreamWaitEvent", g_.rank); break;
      }
    }
  }

  // ---- all_reduce ----
  // Latency rule (and the node-leaders rule): node reduce to local 0, all-reduce on rail 0
  // (local 0 of every node, or the leaders), node broadcast.
  void reduce_ar_bcast(const uint8_t* send, uint8_t* recv, size_t n) {
    if (!n) return;
    node(Collective::Reduce, send, recv, n, 0);
    if (k_ == 0) {
      to_rail();
      rail(Collective::AllReduce, recv, recv, n);
      to_node();
    }
    node(Collective::Broadcast, recv, recv, n, 0);
  }

  // Bandwidth rule: per chunk, node reduce-scatter into a shard slot, rail all-reduce of the
  // shard, node all-gather back into the output.
  void rs_ar_ag(const uint8_t* send, uint8_t* recv, size_t count, const topology::HierPlan& p) {
    const size_t main = count - count % L_;
    const auto cs = chunks(main, p, es_, L_);  // one slot holds a shard (chunk / L): ample
    pipeline(cs.size(), p.pipeline_depth, g_.node_s, g_.rail_s,
             {[&](size_t c, int s) { node(Collective::ReduceScatter, send + bytes(cs[c].first), slot(s), cs[c].second / L_); },
              [&](size_t c, int s) { rail(Collective::AllReduce, slot(s), slot(s), cs[c].second / L_); },
              [&](size_t c, int s) { node(Collective::AllGather, slot(s), recv + bytes(cs[c].first), cs[c].second / L_); }});
    reduce_ar_bcast(send + bytes(main), recv + bytes(main), count - main);
  }

  // ---- reduce_scatter ----
  // hier_rs_rs: stage 0 lays chunk [c0, c0+cn) of every block out as [rail k][node n] and
  // node-reduce-scatters it, so local index k holds its rail's N blocks reduced over the node;
  // stage 1 reduce-scatters those over the rail (NCCL rank n = node n = the block of rail
  // member n), straight into the output.
  void rs_rs(const uint8_t* send, uint8_t* recv, const topology::HierPlan& p) {
    const size_t m = a_.count;
    const auto cs = chunks(m, p, es_ * (W_ + N_), 1);
    pipeline(cs.size(), p.pipeline_depth, g_.node_s, g_.rail_s,
             {[&](size_t c, int s) {
                auto [c0, cn] = cs[c];
                uint8_t* in = slot(s);
                move_blocks(ToScratch, in, send, g_.rails.rails, m, c0, cn);
                node(Collective::ReduceScatter, in, in + bytes(W_ * cn), N_ * cn);
              },
              [&](size_t c, int s) {
                auto [c0, cn] = cs[c];
                rail(Collective::ReduceScatter, slot(s) + bytes(W_ * cn), recv + bytes(c0), cn);
              }});
  }

  // leaders_reduce_ar_scatter: node reduce of every block's chunk to the leader, all-reduce
  // among the leaders, the leader scatters its node's blocks.
  void leaders_rs(const uint8_t* send, uint8_t* recv, const topology::HierPlan& p) {
    const size_t m = a_.count;
    const auto& mine = g_.layout.nodes[n_];
    const auto cs = chunks(m, p, es_ * 3 * W_, 1);
    pipeline(cs.size(), p.pipeline_depth, g_.node_s, g_.rail_s,
             {[&](size_t c, int s) {
                auto [c0, cn] = cs[c];
                move_blocks(ToScratch, slot(s), send, {everyone_}, m, c0, cn);
                node(Collective::Reduce, slot(s), slot(s) + bytes(W_ * cn), W_ * cn, 0);
              },
              [&](size_t c, int s) {
                if (k_ != 0) return;
                uint8_t* red = slot(s) + bytes(W_ * cs[c].second);
                rail(Collective::AllReduce, red, red, W_ * cs[c].second);
              },
              [&](size_t c, int s) {
                auto [c0, cn] = cs[c];
                uint8_t* red = slot(s) + bytes(W_ * cn);
                uint8_t* sc = red + bytes(W_ * cn);
                if (k_ == 0)
                  for (int i = 0; i < L_; ++i) copy(sc + bytes(i * cn), red + bytes(mine[i] * cn), cn, g_.node_s);
                node(Collective::Scatter, sc, recv + bytes(c0), cn, 0);
              }});
  }

  // ---- all_gather ----
  // hier_ag_ag: stage 0 gathers the chunk of every rail member's block over the rail (node
  // order); stage 1 all-gathers those over the node ([rail k][node n]) and puts every block
  // in its place.
  void ag_ag(const uint8_t* send, uint8_t* recv, const topology::HierPlan& p) {
    const size_t m = a_.count;
    const auto cs = chunks(m, p, es_ * (W_ + N_), 1);
    pipeline(cs.size(), p.pipeline_depth, g_.rail_s, g_.node_s,
             {[&](size_t c, int s) {
                auto [c0, cn] = cs[c];
                rail(Collective::AllGather, send + bytes(c0), slot(s), cn);
              },
              [&](size_t c, int s) {
                auto [c0, cn] = cs[c];
                uint8_t* out = slot(s) + bytes(N_ * cn);
                node(Collective::AllGather, slot(s), out, N_ * cn);
                move_blocks(FromScratch, out, recv, g_.rails.rails, m, c0, cn);
              }});
  }

  // leaders_gather_ag_bcast: node gather to the leader, the leaders exchange their nodes'
  // blocks (nodes differ in size, so as sends and receives), node broadcast of all blocks.
  void leaders_ag(const uint8_t* send, uint8_t* recv, const topology::HierPlan& p) {
    const size_t m = a_.count;
    const auto& nodes = g_.layout.nodes;
    std::vector<size_t> first(N_ + 1, 0);  // node n's blocks start at block first[n] of `all`
    for (int n = 0; n < N_; ++n) first[n + 1] = first[n] + nodes[n].size();
    const auto cs = chunks(m, p, es_ * (W_ + L_), 1);
    pipeline(cs.size(), p.pipeline_depth, g_.node_s, g_.rail_s,
             {[&](size_t c, int s) {
                auto [c0, cn] = cs[c];
                node(Collective::Gather, send + bytes(c0), slot(s), cn, 0);
              },
              [&](size_t c, int s) {
                if (k_ != 0) return;
                const size_t cn = cs[c].second;
                uint8_t* all = slot(s) + bytes(L_ * cn);
                copy(all + bytes(first[n_] * cn), slot(s), L_ * cn, g_.rail_s);
                std::vector<nccl::NcclComm::Transfer> xs;
                for (int n = 0; n < N_; ++n) {
                  if (n == n_) continue;
                  xs.push_back({true, slot(s), L_ * cn, a_.dtype, n});
                  xs.push_back({false, all + bytes(first[n] * cn), nodes[n].size() * cn, a_.dtype, n});
                }
                rail_transfers(xs);
              },
              [&](size_t c, int s) {
                auto [c0, cn] = cs[c];
                uint8_t* all = slot(s) + bytes(L_ * cn);
                node(Collective::Broadcast, all, all, W_ * cn, 0);
                move_blocks(FromScratch, all, recv, nodes, m, c0, cn);
              }});
  }

  // ---- broadcast (the root has copied its input into its output) ----
  void rail_bcast_node_bcast(uint8_t* recv, size_t at, size_t n, int root_node, int root_local) {
    if (!n) return;
    if (k_ == root_local) {
      to_rail();
      rail(Collective::Broadcast, recv + bytes(at), recv + bytes(at), n, root_node);
      to_node();
    }
    node(Collective::Broadcast, recv + bytes(at), recv + bytes(at), n, root_local);
  }

  void leaders_bcast(uint8_t* recv, int root_node, int root_local) {
    const size_t n = a_.count;
    if (root_local != 0 && n_ == root_node) node(Collective::Broadcast, recv, recv, n, root_local);
    if (k_ == 0) {
      to_rail();
      rail(Collective::Broadcast, recv, recv, n, root_node);
      to_node();
    }
    node(Collective::Broadcast, recv, recv, n, 0);
  }

  // hier_scatter_bcast_ag: the root's node scatters each chunk into shards, every rail
  // broadcasts one shard from the root's node, every node all-gathers the shards.
  void scatter_bcast_ag(uint8_t* recv, const topology::HierPlan& p, int root_node, int root_local) {
    const size_t count = a_.count, main = count - count % L_;
    const auto cs = chunks(main, p, es_, L_);
    pipeline(cs.size(), p.pipeline_depth, g_.node_s, g_.rail_s,
             {[&](size_t c, int s) {
                if (n_ == root_node)
                  node(Collective::Scatter, recv + bytes(cs[c].first), slot(s), cs[c].second / L_, root_local);
              },
              [&](size_t c, int s) { rail(Collective::Broadcast, slot(s), slot(s), cs[c].second / L_, root_node); },
              [&](size_t c, int s) { node(Collective::AllGather, slot(s), recv + bytes(cs[c].first), cs[c].second / L_); }});
    rail_bcast_node_bcast(recv, main, count - main, root_node, root_local);
  }

  GpuHier& g_;
  const CollArgs& a_;
  size_t es_;
  RedOp op_;
  int n_ = 0, k_ = 0, L_ = 1, N_ = 1, W_ = 1;
  std::vector<int> everyone_;  // 0 .. W-1
};

}  // namespace

void run_rules(GpuHier& g, const CollArgs& a, const topology::HierPlan& plan) {
  const bool reduces = a.coll == Collective::AllReduce || a.coll == Collective::ReduceScatter;
  const bool is_float = a.dtype <= DataType::Float64;  // Float32, Float16, BFloat16, Float64
  if (reduces && a.op == RedOp::Avg && !is_float)
    throw UnsupportedError("rank " + std::to_string(g.rank) + ": " + std::string(to_string(a.coll)) +
                               " with op avg on an integer type is not available for GPU groups that span nodes "
                               "(use sum and divide)",
                           g.rank);
  if (a.coll != Collective::Barrier && a.count == 0) return;
  auto user = static_cast<cudaStream_t>(a.stream);
  // Fork: both streams start after the caller's earlier work.
  check(cudaEventRecord(g.fork->get(), user), "cudaEventRecord", g.rank);
  check(cudaStreamWaitEvent(g.node_s, g.fork->get(), 0), "cudaStreamWaitEvent", g.rank);
  check(cudaStreamWaitEvent(g.rail_s, g.fork->get(), 0), "cudaStreamWaitEvent", g.rank);
  Rules(g, a).run(plan);
  // Join: the caller's stream continues after both.
  check(cudaEventRecord(g.joins[0].get(), g.node_s), "cudaEventRecord", g.rank);
  check(cudaEventRecord(g.joins[1].get(), g.rail_s), "cudaEventRecord", g.rank);
  check(cudaStreamWaitEvent(user, g.joins[0].get(), 0), "cudaStreamWaitEvent", g.rank);
  check(cudaStreamWaitEvent(user, g.joins[1].get(), 0), "cudaStreamWaitEvent", g.rank);
  if (reduces && a.op == RedOp::Avg) divide_async(a.recv, a.count, a.dtype, g.layout.world(), user);
}

}  // namespace actorcc::hier
