// The choice of backend, a group decision (ranks that took different backends would wait for each
// other in setups that never meet), and its setup with the fallbacks, each step ending in a
// verdict every rank shares (bootstrap/verdict.hpp).
#pragma once
#include <memory>

#include "backends/backend.hpp"
#include "common/deadline.hpp"
#include "group/group_context.hpp"

namespace actorcc {

// The backend `requested` resolves to once the peer table is known: Auto means CUDA only if
// every rank has a GPU; CUDA asked for where a rank has none is refused, naming those ranks.
Backend choose_backend(const GroupContext& ctx, Backend requested);

// Collective: sets up the `kind` backend (chosen by choose_backend()) into `out`, within `setup`.
// Across nodes: the hierarchical backend (the CUDA backend inside each node, NCCL rails between),
// or one flat NCCL communicator when ACTORCC_MULTINODE=flat asks for it (the baseline the bench
// compares). Inside one node: the CUDA backend. Either way, GPUs that cannot map each other's
// memory (no P2P, VMM import refused) fall back to flat NCCL, never slower. Throws on every rank
// together, naming the ranks whose setup failed.
void set_up_backend(GroupContext& ctx, Backend kind, Deadline setup, std::unique_ptr<BackendImpl>& out);

}  // namespace actorcc
