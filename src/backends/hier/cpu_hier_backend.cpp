// The CPU backend for groups that span nodes: each node's ranks share one shared-memory
// group, and each rail (one rank per node, topology/rails.hpp) is a TCP mesh. The
// collectives are the hierarchical plans run by algorithms/cpu_hier.
#include <memory>

#include "algorithms/cpu_hier.hpp"
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
    std::vector<int> peers;
    if (int rail = g_.rails.rail_of[ctx.rank]; rail >= 0)
      for (int q : g_.rails.rails[rail])
        if (q != ctx.rank) peers.push_back(q);
    const bootstrap::IdFields f = bootstrap::read_id(ctx.id);
    mesh_ = tcp::Mesh::connect(*ctx.bootstrap, f.token, f.root, peers, Deadline::after(ctx.options.join_timeout),
                               ctx.abort.get());
    g_.node = node_.get();
    g_.mesh = mesh_.get();
    g_.abort = ctx.abort.get();
    g_.timeout = ctx.options.timeout;
    LOG_INFO("rank " << ctx.rank << ": CPU across " << g_.layout.num_nodes() << " nodes, "
                     << (g_.rails.note.empty() ? "one TCP rail per local index" : "a TCP rail of node leaders") << ", "
                     << peers.size() << " rail peer(s)");
  }

  Backend kind() const override { return Backend::Cpu; }
  void run(const CollArgs& a) override {
    if (!cpu::hier_serves(a.coll))
      throw UnsupportedError(std::string(to_string(a.coll)) +
                                 " is not available yet for CPU groups that span nodes (ranks on one host have it)",
                             ctx_.rank);
    try {
      cpu::hier_collective(g_, a);
    } catch (const Error& e) {
      // A step that failed leaves the group mid-collective. Poison it for everyone, with the
      // cause: node peers stop through the shared-memory abort word, the other nodes through
      // the bootstrap (a cut link may leave them waiting on a rail until their own timeout).
      if (!ctx_.abort->raised()) ctx_.bootstrap->abort(e.what());
      throw;
    }
  }
  std::string plan(Collective c, size_t bytes, bool) const override {
    return cpu::hier_serves(c) ? cpu::hier_route(g_, c, bytes, 1, 0) : "none";
  }

 private:
  GroupContext& ctx_;
  std::unique_ptr<ShmGroup> node_;
  std::unique_ptr<tcp::Mesh> mesh_;
  cpu::HierGroup g_;
};

}  // namespace

std::unique_ptr<BackendImpl> make_cpu_hier_backend(GroupContext& ctx) { return std::make_unique<CpuHierBackend>(ctx); }

}  // namespace actorcc
