// The CUDA routes: one row per kernel entry point. A row's name is its file
// (algorithms/cuda/<name>.cu, or a row of forwarded_routes.cu), its launch function
// (cuda::<name> in launch.hpp), its ACTORCC_ALGO value and what plan() returns. The planner
// (planner.cpp) only returns a route whose condition holds for the call; the backend launches
// the row's function and nothing else, so plan() always names what runs. Plain host code (no
// CUDA headers): the planner and its unit tests build without nvcc.
//
// X(Route, name, collective served (nullopt: every one), condition on the call)
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "actorcc/types.hpp"

#define ACTORCC_CUDA_ROUTES(X)                                                  \
  X(Copy, copy, std::nullopt, one_rank)                                         \
  X(OneShot, oneshot, Collective::AllReduce, any_buffer)                        \
  X(OneShotPush, oneshot_push, Collective::AllReduce, any_buffer)               \
  X(OneShotLL128, oneshot_ll128, Collective::AllReduce, ll128_buffers)          \
  X(TwoShot, twoshot, Collective::AllReduce, any_buffer)                        \
  X(TwoShotPipe, twoshot_pipe, Collective::AllReduce, any_buffer)               \
  X(TwoShotLL128, twoshot_ll128, Collective::AllReduce, ll128_buffers)          \
  X(ReduceScatterLL128, reduce_scatter_ll128, Collective::ReduceScatter, ll128_chunks) \
  X(ReduceScatterPush, reduce_scatter_push, Collective::ReduceScatter, any_buffer) \
  X(AllGatherLL128, allgather_ll128, Collective::AllGather, ll128_chunks)       \
  X(AllGatherPush, allgather_push, Collective::AllGather, any_buffer)           \
  X(BroadcastPush, broadcast_push, Collective::Broadcast, any_buffer)           \
  X(BarrierFlags, barrier_flags, Collective::Barrier, any_buffer)               \
  X(ReducePush, reduce_push, Collective::Reduce, any_buffer)                    \
  X(AllToAllPush, all_to_all_push, Collective::AllToAll, any_buffer)            \
  X(GatherPush, gather_push, Collective::Gather, any_buffer)                    \
  X(ScatterPush, scatter_push, Collective::Scatter, any_buffer)                 \
  X(SendPush, send_push, Collective::Send, any_buffer)                          \
  X(RecvPush, recv_push, Collective::Recv, any_buffer)                          \
  X(SendRecvPush, send_recv_push, Collective::SendRecv, any_buffer)             \
  X(AllToAllVPush, all_to_all_v_push, Collective::AllToAllV, any_buffer)

namespace actorcc::cuda {

enum class Route : uint8_t {
#define ACTORCC_ROUTE_ENUM(e, name, coll, cond) e,
  ACTORCC_CUDA_ROUTES(ACTORCC_ROUTE_ENUM)
#undef ACTORCC_ROUTE_ENUM
};

// What a route's condition looks at.
struct RouteArgs {
  Collective coll = Collective::AllReduce;
  size_t bytes = 0;        // the message; reduce_scatter / all_gather: the full buffer (world chunks)
  size_t esz = 1;          // bytes per element
  int world = 1;
  bool registered = false; // the output lies in a registered buffer
  uintptr_t addr = 0;      // send | recv addresses (their low bits: alignment); 0 = aligned
};

struct RouteInfo {
  Route route;
  const char* name;
  std::optional<Collective> coll;
  bool (*condition)(const RouteArgs&);
};

// Every route's row, in enum order.
const RouteInfo& route_info(Route r);
// Whether route r may run the call: it serves the collective, the group's size fits (copy: one
// rank, every other route: more), and its condition on the buffers holds.
bool can_run(Route r, const RouteArgs& a);
// Whether some route of more than one rank serves collective c (every collective has one).
bool has_route(Collective c);

}  // namespace actorcc::cuda
