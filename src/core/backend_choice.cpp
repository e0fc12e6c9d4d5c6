#include "core/backend_choice.hpp"

#include <string>
#include <vector>

#include "actorcc/error.hpp"
#include "bootstrap/verdict.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "topology/topology.hpp"

namespace actorcc {

namespace {

// How a GPU group that spans nodes is served: "hier" (default) or "flat". A group decision:
// rank 0's value holds for every rank (a rank that read another one says so).
std::string multinode_shape(Bootstrap& bs, int rank, Deadline dl) {
  // setting: ACTORCC_MULTINODE - hier|flat: GPU groups across nodes use the hierarchical backend or one flat NCCL communicator over all ranks (default hier; rank 0's value holds)
  std::string mine = env::get("ACTORCC_MULTINODE").value_or("hier");
  if (mine != "hier" && mine != "flat") {
    LOG_WARN("rank " << rank << ": ACTORCC_MULTINODE=" << mine << " is neither hier nor flat; using hier");
    mine = "hier";
  }
  const auto all = bs.allgather(mine, dl);
  if (all[0] != mine) LOG_WARN("rank " << rank << ": ACTORCC_MULTINODE=" << mine << " here, " << all[0] << " on rank 0: using rank 0's");
  return all[0];
}

}  // namespace

Backend choose_backend(const GroupContext& ctx, Backend requested) {
  std::vector<int> no_gpu;
  for (const auto& p : ctx.peers)
    if (p.gpu_uuid.empty()) no_gpu.push_back(p.rank);
  Backend kind = requested;
  if (kind == Backend::Auto) kind = no_gpu.empty() ? Backend::Cuda : Backend::Cpu;
  if (kind == Backend::Cuda && !no_gpu.empty())
    throw UnsupportedError("backend 'cuda' needs a GPU on every rank; rank(s) " + join(no_gpu, ", ") + " have none",
                           ctx.rank);
  return kind;
}

void set_up_backend(GroupContext& ctx, Backend kind, Deadline setup, std::unique_ptr<BackendImpl>& backend) {
  Bootstrap& bs = *ctx.bootstrap;
  const int rank = ctx.rank;
  if (kind == Backend::Cpu) {
    auto bad = failed_ranks(bs, setup, try_make(bs, backend, [&] { return make_cpu_backend(ctx); }));
    if (!bad.ok()) bad.raise("CPU backend setup failed on ", rank);
    return;
  }
  const bool flat = ctx.num_nodes > 1 && multinode_shape(bs, rank, setup) == "flat";
  const std::string where = ctx.num_nodes > 1 ? cat("the group spans ", ctx.num_nodes, " nodes") : "";
  if (flat) {
    auto bad = failed_ranks(bs, setup, try_make(bs, backend, [&] {
      return make_nccl_backend(ctx, where + " and ACTORCC_MULTINODE=flat asks for one NCCL communicator");
    }));
    if (!bad.ok()) bad.raise("NCCL setup for a multi-node group failed on ", rank);
    return;
  }
  const char* name = ctx.num_nodes > 1 ? "hierarchical GPU" : "CUDA";
  auto bad = failed_ranks(bs, setup, try_make(bs, backend, [&] {
    return ctx.num_nodes > 1 ? make_gpu_hier_backend(ctx) : make_cuda_backend(ctx);
  }));
  if (bad.ok()) return;
  // NCCL refuses a GPU used by two ranks too (only on those ranks; the others then wait in its
  // setup until the sharers' abort ends it: tests/python/test_gpu_nccl_setup.py), so there is no
  // fallback to try.
  if (topology::shared_gpu(ctx.peers).first >= 0) bad.raise(std::string(name) + " backend setup failed on ", rank);
  std::string why = (where.empty() ? "" : where + "; ") + "the NVLink/VMM path is unavailable:" + bad.text;
  backend.reset();
  auto bad2 = failed_ranks(bs, setup, try_make(bs, backend, [&] { return make_nccl_backend(ctx, why); }));
  if (!bad2.ok())
    bad2.raise(std::string(name) + " backend setup failed on " + bad.text + "\nand the NCCL fallback failed on ", rank);
}

}  // namespace actorcc
