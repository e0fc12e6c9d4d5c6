// The CUDA backend's planner: which kernel a call takes, from the collective, its size, the
// world and the group's agreed tuning. Plain host code, unit-tested without a GPU
// (tests/unit/test_cuda_planner.cpp); the measurements behind each threshold are in
// tests/gpu/TUNING.md.
#pragma once
#include <cstddef>
#include <string>

#include "actorcc/types.hpp"
#include "algorithms/cuda_tuning.hpp"

namespace actorcc::cuda {

enum class Route {
  Copy,          // 1 rank: a local copy
  OneShot,       // all-reduce, LL lines (cuda_oneshot.cu)
  LL128,         // all-reduce, LL128 one-shot (cuda_oneshot_ll128.cu)
  LL128TwoShot,  // all-reduce, LL128 two-shot (cuda_twoshot_ll128.cu)
  Push,          // all-reduce, fenced one-shot push (cuda_oneshot_push.cu)
  TwoShot,       // all-reduce, fenced two-shot (cuda_twoshot.cu)
  Pipe,          // all-reduce, pipelined two-shot (cuda_twoshot_pipe.cu)
  LL128Lines,    // reduce_scatter / all_gather in LL128 lines (cuda_twoshot_ll128.cu)
  Other,         // the collective's push kernel (reduce_scatter, all_gather, broadcast), the barrier
};

// The all-reduce route an ACTORCC_ALGO / Options.algo name forces (aliases included): Other for
// "" and "auto"; `known` is false (and the route Other) for a name that is no CUDA all-reduce.
Route forced_route(const std::string& name, bool& known);

// The route of a call of `bytes` (the message; reduce_scatter / all_gather: the full buffer),
// `registered_output` when its output lies in a registered buffer; `forced` (from
// forced_route) overrides the all-reduce planner.
Route pick_route(Collective c, size_t bytes, bool registered_output, int world, const Tuning& t, Route forced);

// Where the LL128 two-shot takes over from the LL128 one-shot, for more than 2 ranks.
size_t twoshot_ll128_min(int world, const Tuning& t);

// plan()'s name for a route of collective c.
std::string route_name(Route r, Collective c);

}  // namespace actorcc::cuda
