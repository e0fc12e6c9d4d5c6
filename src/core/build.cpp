#include "core/build.hpp"

#include <chrono>
#include <iomanip>
#include <utility>

#include "bootstrap/wire.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "core/backend_choice.hpp"
#include "core/group_tag.hpp"
#include "core/interrupt_registry.hpp"
#include "topology/topology.hpp"

namespace actorcc {

namespace {

// What a rank settles on its own before it joins: its settings, its device and its identity.
// The device is chosen before joining so the peer table carries every rank's GPU identity.
struct LocalSetup {
  Options opt;
  int device = -1;
  PeerInfo self;
  std::chrono::steady_clock::time_point begun, done;  // for the ready line's "local" span
};

LocalSetup prepare(const UniqueId& id, int rank, int world, const Options& user_options) {
  if (world < 1 || world > wire::kMaxWorld)
    throw InvalidArgument(cat("world_size must be in 1..", wire::kMaxWorld, ", got ", world), rank);
  if (rank < 0 || rank >= world) throw InvalidArgument(cat("rank ", rank, " is outside the group of ", world), rank);
  Bootstrap::check_join(id, rank, world);
  LocalSetup l;
  l.begun = std::chrono::steady_clock::now();
  l.opt = options_from_env(user_options);
  if (l.opt.backend != Backend::Cpu) l.device = cuda_resolve_device(l.opt.device);
  if (l.opt.backend == Backend::Cuda && l.device < 0)
    throw UnsupportedError("backend 'cuda' requested but no CUDA device is usable here", rank);
  l.self = topology::local_peer_info(rank, l.device);
  l.done = std::chrono::steady_clock::now();
  return l;
}

// Every rank's descriptor from the join, in rank order. A blob comes from whoever held the
// token; one that does not decode is that rank's fault, and every rank finds the same, so every
// rank names it.
std::vector<PeerInfo> peer_table(const std::vector<std::string>& blobs, int rank) {
  std::vector<PeerInfo> peers;
  for (const auto& blob : blobs) {
    const int from = static_cast<int>(peers.size());
    try {
      peers.push_back(topology::decode(blob));
    } catch (const Error& e) {
      throw RemoteError(cat("rank ", from, " joined with a peer descriptor this rank cannot read (", e.message(),
                            "): not an actorcc rank of this version"),
                        from, rank);
    }
  }
  for (int r = 0; r < static_cast<int>(peers.size()); ++r)
    if (peers[r].rank != r)
      throw RemoteError(cat("rank ", r, " joined with a peer descriptor for rank ", peers[r].rank,
                            ": not an actorcc rank of this version"),
                        r, rank);
  return peers;
}

void build_impl(const UniqueId& id, int rank, int world, const LocalSetup& local, Communicator::Impl& impl,
                uint64_t digest) {
  using Ms = std::chrono::duration<double, std::milli>;
  const auto t_begin = local.begun, t_local = local.done;
  const Options& opt = local.opt;
  impl.member = elastic::Member::reserve(id, digest);
  impl.bootstrap = Bootstrap::join(id, rank, world, impl.member->wrap(topology::encode(local.self)),
                                   Deadline::after(opt.join_timeout), impl.abort);
  const auto t_joined = std::chrono::steady_clock::now();

  GroupContext& ctx = impl.ctx;
  ctx.rank = rank;
  ctx.world = world;
  ctx.options = opt;
  ctx.peers = peer_table(impl.member->unwrap_all(impl.bootstrap->peer_blobs(), rank), rank);
  ctx.num_nodes = topology::assign_nodes(ctx.peers);
  for (const auto& p : ctx.peers)
    if (p.node == ctx.peers[rank].node) ctx.local_ranks.push_back(p.rank);
  ctx.local_index = ctx.peers[rank].local_rank;
  ctx.group_tag = group_tag_of(id);
  ctx.id = id;
  ctx.bootstrap = impl.bootstrap.get();
  ctx.abort = impl.abort;
  if (const int host = impl.member->root_host(); host >= 0) impl.bootstrap->set_root_host(host);
  impl.departures.start(rank, world);
  Communicator::Impl* self = &impl;  // the bootstrap (and its reader thread) goes before impl's members
  impl.bootstrap->on_departure([self](const Bootstrap::Departure& d) { self->departures.on_departure(d, *self->abort); });

  const Backend kind = choose_backend(ctx, opt.backend);
  ctx.options.device = kind == Backend::Cuda ? local.device : -1;
  set_up_backend(ctx, kind, Deadline::after(opt.join_timeout), impl.backend);
  // Where a slow start went: this process's GPU and identity, the join (which holds the wait
  // for the last rank to arrive), the backend's setup.
  const auto t_ready = std::chrono::steady_clock::now();
  LOG_INFO("rank " << rank << "/" << world << " ready: backend " << to_string(kind) << ", " << ctx.num_nodes
                   << " node(s), local rank " << ctx.local_index << " of " << ctx.local_ranks.size() << "; in " << std::fixed << std::setprecision(1)
                   << Ms(t_ready - t_begin).count() << " ms: local " << Ms(t_local - t_begin).count() << ", join "
                   << Ms(t_joined - t_local).count() << ", setup " << Ms(t_ready - t_joined).count());
}

}  // namespace

std::unique_ptr<Communicator::Impl> build(const UniqueId& id, int rank, int world, const Options& user_options,
                                          uint64_t digest, std::shared_ptr<AbortSignal> abort) {
  // Everything local first; a mistake found there goes to the group's root before it is raised
  // here, so the other ranks fail at once, naming this rank and the mistake, instead of waiting
  // out the join timeout for a rank that will never come.
  LocalSetup local;
  try {
    local = prepare(id, rank, world, user_options);
  } catch (const Error& e) {
    Communicator::refuse_join(id, rank, world, e.message(), user_options.join_timeout);
    throw;
  }
  auto impl = std::make_unique<Communicator::Impl>();
  impl->abort = abort ? std::move(abort) : std::make_shared<AbortSignal>(rank);
  ConstructionScope scope(impl->abort.get());
  try {
    build_impl(id, rank, world, local, *impl, digest);
    return impl;
  } catch (...) {
    // Interrupted after joining: the others learn it from the root now, naming this rank (its
    // goodbye alone would read as a clean leave, or a rank lost while forming).
    if (impl->bootstrap && interrupted(*impl->abort, rank)) impl->bootstrap->abort(impl->abort->reason(), rank);
    throw;
  }
}

}  // namespace actorcc
