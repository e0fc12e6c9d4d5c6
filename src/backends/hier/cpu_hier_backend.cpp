// The CPU backend for groups that span nodes: each node's ranks share one shared-memory
// group, and every rank has a TCP connection to every rank on another node (the rails,
// topology/rails.hpp, are among them). The collectives are the hierarchical plans run by
// algorithms/cpu_hier, the point-to-point calls algorithms/cpu_hier_p2p; a helper thread
// per rank carries the network side of both beside the node side.
#include <memory>
#include <mutex>

#include "algorithms/cpu_hier.hpp"
#include "algorithms/p2p_plan.hpp"
#include "bootstrap/id_fields.hpp"
#include "common/log.hpp"
#include "backends/backend.hpp"

namespace actorcc {
namespace {

class CpuHierBackend final : public BackendImpl {
 public:
  explicit CpuHierBackend(GroupContext& ctx) : ctx_(ctx), node_(ShmGroup::establish(ctx)) {
    g_.rank = ctx.rank;
    g_.layout = topology::node_layout(ctx.peers);
    g_.rails = topology::plan_rails(g_.layout);
    if (!g_.rails.note.empty() && ctx.rank == 0) LOG_WARN("rank 0: " << g_.rails.note);
    // Every rank on another node: the rail steps use the rail peers among them, point-to-point
    // calls any of them. Set up once, bounded and authenticated (transport/tcp/mesh.hpp), so
    // no call ever waits on a connection being made.
    std::vector<int> peers;
    for (int q = 0; q < g_.layout.world(); ++q)
      if (g_.layout.node_of[q] != g_.layout.node_of[ctx.rank]) peers.push_back(q);
    const bootstrap::IdFields f = bootstrap::read_id(ctx.id);
    mesh_ = tcp::Mesh::connect(*ctx.bootstrap, f.token, f.root, peers, Deadline::after(ctx.options.join_timeout),
                               ctx.abort.get());
    g_.node = node_.get();
    g_.mesh = mesh_.get();
    g_.helper = &helper_;
    g_.abort = ctx.abort.get();
    g_.fail_group = [this](const std::exception& e) { fail_group(e); };
    g_.timeout = ctx.options.timeout;
    LOG_INFO("rank " << ctx.rank << ": CPU across " << g_.layout.num_nodes() << " nodes, "
                     << (g_.rails.note.empty() ? "one TCP rail per local index" : "a TCP rail of node leaders") << ", "
                     << peers.size() << " TCP peer(s) on other nodes");
  }

  Backend kind() const override { return Backend::Cpu; }
  void run(const CollArgs& a) override {
    try {
      // Point-to-point based calls run even with nothing to move: the empty message still
      // lets the receiver check that the sender agreed on the size.
      if (is_p2p_based(a.coll)) return cpu::hier_send_recv(g_, a);
      if (!cpu::hier_serves(a.coll))
        throw InvalidArgument("unknown collective " + std::to_string(static_cast<int>(a.coll)), ctx_.rank);
      // The call as every rank must agree on it: compared with the node's ranks at the first
      // sync (shm flag blocks), with the other nodes' in every frame between them.
      g_.call = CallDesc::of(a);
      node_->begin_call(g_.call);
      cpu::hier_collective(g_, a);
    } catch (const Error& e) {
      fail_group(e);
      throw;
    }
  }
  std::string plan(Collective c, size_t bytes, bool) const override {
    if (is_p2p_based(c)) return "shm_tcp_send_recv";
    return cpu::hier_serves(c) ? cpu::hier_route(g_, c, bytes, 1, 0) : "none";
  }

 private:
  // A step that failed leaves the group mid-collective. Poison it for everyone, with the
  // cause: node peers stop through the shared-memory abort word, the other nodes through
  // the bootstrap (a cut link may leave them waiting on a rail until their own timeout).
  // Sent even when this rank's signal is raised already: a node step that failed here (a
  // timeout, a mismatch, a node peer's abort word) raised it without telling the other nodes.
  // The error's culprit (the peer it waited for, the one whose connection broke) travels
  // with it, so every rank's error names that rank as culprit(), not this one.
  void fail_group(const std::exception& e) {
    std::lock_guard<std::mutex> l(fail_mu_);  // the helper thread and this one may both fail
    if (told_) return;
    told_ = true;
    const auto* known = dynamic_cast<const Error*>(&e);
    ctx_.bootstrap->abort(e.what(), known ? known->culprit() : -1);
  }

  GroupContext& ctx_;
  std::unique_ptr<ShmGroup> node_;
  std::unique_ptr<tcp::Mesh> mesh_;
  std::mutex fail_mu_;
  bool told_ = false;  // the group has been told of this rank's failure
  cpu::HierGroup g_;
  // Last: joined before the transports it uses go away.
  cpu::NetHelper helper_;
};

}  // namespace

std::unique_ptr<BackendImpl> make_cpu_hier_backend(GroupContext& ctx) { return std::make_unique<CpuHierBackend>(ctx); }

}  // namespace actorcc
