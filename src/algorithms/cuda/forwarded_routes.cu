// The routes whose launch function only forwards to a kernel of another file, in a shape of
// its own, as rows of one table, and copy (one rank) beside them: one nvcc compile for all
// of them, not one per route; each keeps its name (routes.hpp, ACTORCC_ALGO).
//   copy                one rank: every collective is a copy of its input (none for the barrier
//                       or in place)
//   gather_push         every rank writes its input into the root's slot for it; the root copies
//                       each peer's tiles to their block of its output (all_to_all_push.cu's
//                       kernel, in the gather shape)
//   scatter_push        the root writes block q of its input into rank q's slot for the root;
//                       every rank copies its block out (all_to_all_push.cu's kernel, in the
//                       scatter shape)
//   reduce_push         the one-shot push all-reduce's kernel (oneshot_push.cu) with a root, so
//                       only the root receives the peers' copies and folds them (in rank order,
//                       as the all-reduce does: the root's result is bitwise the all-reduce's)
//   reduce_scatter_push the first phase of the two-shot all-reduce (twoshot.cu) with segments of
//                       exactly recv_count elements: rank s's output is the fold of segment s of
//                       every input
//   send_push, recv_push, send_recv_push, all_to_all_v_push
//                       one transfer to a peer, one from a peer, a batch of both progressing at
//                       once, a send to and a receive from every rank (counts per peer; its own
//                       block a copy): the call's transfers (algorithms/p2p_plan.cpp) on
//                       p2p_push.cu's per-pair channels
#include "algorithms/cuda/launch.hpp"

namespace actorcc::cuda {

cudaError_t copy(const DeviceComm&, const Tuning&, const CallArgs& a) {
  if (!a.send || !a.recv || a.send == a.recv || a.count == 0) return cudaSuccess;
  return cudaMemcpyAsync(a.recv, a.send, a.count * dtype_bytes(a.dtype), cudaMemcpyDeviceToDevice, a.stream);
}

// X(route, what its launch function returns, given c, t and a)
#define ACTORCC_FORWARDED_ROUTES(X)                                                \
  X(gather_push, launch_exchange(c, t, a, ExchangeShape::Gather))                  \
  X(scatter_push, launch_exchange(c, t, a, ExchangeShape::Scatter))                \
  X(reduce_push, launch_push_reduce(c, t, a, a.root))                              \
  X(reduce_scatter_push, launch_rs_ag(c, t, a, a.count * c.world, a.count, false)) \
  X(send_push, launch_p2p(c, t, a))                                                \
  X(recv_push, launch_p2p(c, t, a))                                                \
  X(send_recv_push, launch_p2p(c, t, a))                                           \
  X(all_to_all_v_push, launch_p2p(c, t, a))

#define ACTORCC_FORWARD(name, call) \
  cudaError_t name(const DeviceComm& c, const Tuning& t, const CallArgs& a) { return call; }
ACTORCC_FORWARDED_ROUTES(ACTORCC_FORWARD)
#undef ACTORCC_FORWARD
#undef ACTORCC_FORWARDED_ROUTES

}  // namespace actorcc::cuda
