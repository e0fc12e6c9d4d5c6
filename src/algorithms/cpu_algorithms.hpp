// CPU collectives over a host's shared-memory group (transport/shm/shm_group.hpp explains the
// rounds, buffers and sync points they rely on). One file per collective. Each cuts the call
// into rounds that fit one shm buffer; every rank computes the same cuts from the same args,
// so every rank runs the same sequence of rounds and sync points.
#pragma once
#include <cstddef>

#include "group/group_context.hpp"
#include "transport/shm/shm_group.hpp"

namespace actorcc::cpu {

// All-reduce strategies. One-shot: every rank reduces the whole chunk from every slot (one
// sync point per round; best for small messages, where sync dominates). Two-shot: rank r
// reduces slice r of the chunk into its own slot, then everyone copies all slices out (two
// sync points, but each rank reduces only 1/n of the data).
// root_local >= 0: reduce to that rank only (Reduce; the others only stage their input).
void all_reduce_oneshot(ShmGroup& g, const CollArgs& a, int root_local = -1);
void all_reduce_twoshot(ShmGroup& g, const CollArgs& a);
void reduce_scatter(ShmGroup& g, const CollArgs& a);
void all_gather(ShmGroup& g, const CollArgs& a);
void broadcast(ShmGroup& g, const CollArgs& a, int root_local);

// Point-to-point and the collectives built on it (Send, Recv, SendRecv, AllToAll(V), Gather,
// Scatter: algorithms/p2p_plan.hpp), over the shm channels (shm_p2p.hpp).
void send_recv(ShmGroup& g, const CollArgs& a);

// Largest message (bytes) for which the planner picks one-shot all-reduce.
inline constexpr size_t kOneShotMaxBytes = size_t{64} << 10;

}  // namespace actorcc::cpu
