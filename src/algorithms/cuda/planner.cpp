#include "algorithms/cuda/planner.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "actorcc/error.hpp"

namespace actorcc::cuda {

namespace {

// The routes' conditions (the last column of ACTORCC_CUDA_ROUTES).
bool one_rank(const RouteArgs&) { return true; }
bool any_buffer(const RouteArgs&) { return true; }
// LL128 lanes move 4-byte words, and 8-byte elements whole (kernels/ll128_lines.cuh).
size_t ll128_align(const RouteArgs& a) { return std::max<size_t>(4, a.esz); }
bool ll128_buffers(const RouteArgs& a) { return (a.addr & (ll128_align(a) - 1)) == 0; }
// reduce_scatter's and all_gather's chunks (bytes / world each) must start on such a word too.
bool ll128_chunks(const RouteArgs& a) { return ll128_buffers(a) && (a.bytes / size_t(a.world)) % ll128_align(a) == 0; }

const RouteInfo kRoutes[] = {
#define ACTORCC_ROUTE_ROW(e, name, coll, cond) {Route::e, #name, coll, &cond},
    ACTORCC_CUDA_ROUTES(ACTORCC_ROUTE_ROW)
#undef ACTORCC_ROUTE_ROW
};

// Older names ACTORCC_ALGO still accepts.
constexpr std::pair<const char*, Route> kAliases[] = {
    {"ll", Route::OneShot},           {"oneshot_ll", Route::OneShot},     {"push", Route::OneShotPush},
    {"two_shot", Route::TwoShot},     {"pipe", Route::TwoShotPipe},       {"ll128", Route::OneShotLL128},
    {"ll128_twoshot", Route::TwoShotLL128}};

// The all-reduce planner, for buffers every route can take. The measurements behind each
// threshold: docs/perf/planner.md.
Route plan_all_reduce(size_t bytes, bool registered_output, int world, const Tuning& t) {
  // A registered output: large calls take the pipe, whose all-gather then stores into the
  // peers' outputs directly (no copy out of the workspace).
  if (registered_output && bytes >= t.reg_pipe_min) return Route::TwoShotPipe;
  // One-shot algorithms move (world-1) copies of the message out of every rank, so their
  // thresholds shrink with the world (measured for 2 ranks; a guess beyond). With 2 ranks
  // one-shot and two-shot move the same bytes; with more, the one-shot moves world/2 times
  // the two-shot's, so its range ends at the push's old limit (4 MiB x 2/world).
  const size_t scale = size_t(world);
  if (bytes <= t.ll_max * 2 / scale) return Route::OneShot;
  // With more than 2 ranks the LL128 two-shot moves 2 (world-1)/world copies out of each rank
  // instead of world - 1, without the pipe's per-tile flag rounds.
  if (scale > 2 && bytes >= twoshot_ll128_min(world, t) && bytes <= t.ll128_twoshot_max) return Route::TwoShotLL128;
  const size_t ll128_max = scale == 2 ? t.ll128_max : std::min(t.ll128_max, t.push_max);
  if (bytes <= ll128_max * 2 / scale) return Route::OneShotLL128;
  if (bytes <= t.push_max * 2 / scale) return Route::OneShotPush;
  // Above that the pipelined two-shot (RS/AG of consecutive tiles overlapped per CTA); it
  // measured as fast or faster than the plain two-shot from 2 MiB up on 2 ranks.
  if (bytes >= t.pipe_min) return Route::TwoShotPipe;
  return Route::TwoShot;
}

}  // namespace

const RouteInfo& route_info(Route r) { return kRoutes[static_cast<size_t>(r)]; }

bool can_run(Route r, const RouteArgs& a) {
  const RouteInfo& ri = route_info(r);
  if ((r == Route::Copy) != (a.world == 1)) return false;
  if (ri.coll && *ri.coll != a.coll) return false;
  return ri.condition(a);
}

bool has_route(Collective c) {
  for (const RouteInfo& ri : kRoutes)
    if (ri.coll == c) return true;
  return false;
}

std::optional<Route> forced_route(const std::string& a, bool& known) {
  known = true;
  if (a.empty() || a == "auto") return std::nullopt;
  for (const RouteInfo& ri : kRoutes)
    if (ri.coll == Collective::AllReduce && a == ri.name) return ri.route;
  for (const auto& [name, r] : kAliases)
    if (a == name) return r;
  known = false;
  return std::nullopt;
}

// The one-shot sends (W-1) N out of each rank, the two-shot 2 (W-1)/W N plus a hop, so the
// crossover N scales by W / ((W-1)(W-2)); ll128_twoshot_min is the one measured for 4 ranks,
// other worlds follow that model (8 ranks: 0.29x, 3 ranks: 2.25x) until measured.
size_t twoshot_ll128_min(int world, const Tuning& t) {
  const size_t W = size_t(world);
  return W > 2 ? t.ll128_twoshot_min * 3 * W / (2 * (W - 1) * (W - 2)) : t.ll128_twoshot_min;
}

Route pick_route(const RouteArgs& a, const Tuning& t, std::optional<Route> forced) {
  if (a.world == 1) return Route::Copy;
  switch (a.coll) {
    case Collective::ReduceScatter:
    case Collective::AllGather: {
      const bool rs = a.coll == Collective::ReduceScatter;
      const Route lines = rs ? Route::ReduceScatterLL128 : Route::AllGatherLL128;
      if (a.bytes <= t.ll128_rsag_max && can_run(lines, a)) return lines;
      return rs ? Route::ReduceScatterPush : Route::AllGatherPush;
    }
    case Collective::Broadcast: return Route::BroadcastPush;
    case Collective::Barrier: return Route::BarrierFlags;
    case Collective::Reduce: return Route::ReducePush;
    case Collective::AllToAll: return Route::AllToAllPush;
    case Collective::Gather: return Route::GatherPush;
    case Collective::Scatter: return Route::ScatterPush;
    case Collective::Send: return Route::SendPush;
    case Collective::Recv: return Route::RecvPush;
    case Collective::SendRecv: return Route::SendRecvPush;
    case Collective::AllToAllV: return Route::AllToAllVPush;
    case Collective::AllReduce: break;
  }
  const Route r = forced ? *forced : plan_all_reduce(a.bytes, a.registered, a.world, t);
  if (can_run(r, a)) return r;
  // Only the LL128 routes refuse buffers: the one-shot push where it is not slower than the
  // pipelined two-shot (up to push_max * 2/world), the pipe above, and always the pipe in place
  // of the LL128 two-shot.
  if (r == Route::OneShotLL128 && a.bytes <= t.push_max * 2 / size_t(a.world)) return Route::OneShotPush;
  return Route::TwoShotPipe;
}

RouteArgs plan_args(Collective c, size_t bytes, bool registered, int world) {
  RouteArgs a;
  a.coll = c;
  a.bytes = bytes;
  // Element size 1: the chunk test (bytes / world a multiple of 4) then agrees with the call's for
  // every dtype, since chunks of 8-byte elements are multiples of 8 anyway.
  a.esz = 1;
  a.world = world;
  a.registered = registered;
  return a;
}

}  // namespace actorcc::cuda
