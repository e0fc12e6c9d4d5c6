// The CUDA backend's planner: which route (algorithms/cuda/routes.hpp) a call takes, from the
// collective, its size, its buffers, the world and the group's agreed tuning. Plain host code,
// unit-tested without a GPU (tests/unit/test_cuda_planner.cpp, test_planner_routes.cpp); the
// measurements behind each threshold are in docs/perf/planner.md.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "actorcc/types.hpp"
#include "algorithms/cuda/routes.hpp"
#include "algorithms/cuda/tuning.hpp"

namespace actorcc::cuda {

// The all-reduce route an ACTORCC_ALGO / Options.algo name forces (aliases included): nullopt for
// "" and "auto"; `known` is false (and the result nullopt) for a name that is no CUDA all-reduce.
std::optional<Route> forced_route(const std::string& name, bool& known);

// The route of a call; `forced` (from forced_route) overrides the all-reduce planner. The result's
// can_run always holds: a forced or planned LL128 route whose buffers the lines cannot carry gives
// way here (to the one-shot push or the pipelined two-shot), never inside the algorithm.
Route pick_route(const RouteArgs& a, const Tuning& t, std::optional<Route> forced = std::nullopt);

// The arguments of plan(c, bytes, registered): buffers as cudaMalloc returns them (aligned).
RouteArgs plan_args(Collective c, size_t bytes, bool registered, int world);

// Where the LL128 two-shot takes over from the LL128 one-shot, for more than 2 ranks.
size_t twoshot_ll128_min(int world, const Tuning& t);

// plan()'s name for a route: its row's name.
inline std::string route_name(Route r) { return route_info(r).name; }

}  // namespace actorcc::cuda
