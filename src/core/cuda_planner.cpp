#include "core/cuda_planner.hpp"

#include <algorithm>

namespace actorcc::cuda {

Route forced_route(const std::string& a, bool& known) {
  known = true;
  if (a.empty() || a == "auto") return Route::Other;
  if (a == "oneshot" || a == "ll" || a == "oneshot_ll") return Route::OneShot;
  if (a == "oneshot_push" || a == "push") return Route::Push;
  if (a == "twoshot" || a == "two_shot") return Route::TwoShot;
  if (a == "twoshot_pipe" || a == "pipe") return Route::Pipe;
  if (a == "oneshot_ll128" || a == "ll128") return Route::LL128;
  if (a == "twoshot_ll128" || a == "ll128_twoshot") return Route::LL128TwoShot;
  known = false;
  return Route::Other;
}

// The one-shot sends (W-1) N out of each rank, the two-shot 2 (W-1)/W N plus a hop, so the
// crossover N scales by W / ((W-1)(W-2)); ll128_twoshot_min is the one measured for 4 ranks
// (TUNING.md rows 32-33), other worlds follow that model (8 ranks: 0.29x, 3 ranks: 2.25x)
// until measured.
size_t twoshot_ll128_min(int world, const Tuning& t) {
  const size_t W = size_t(world);
  return W > 2 ? t.ll128_twoshot_min * 3 * W / (2 * (W - 1) * (W - 2)) : t.ll128_twoshot_min;
}

Route pick_route(Collective c, size_t bytes, bool registered_output, int world, const Tuning& t, Route forced) {
  if (world == 1) return Route::Copy;
  if ((c == Collective::ReduceScatter || c == Collective::AllGather) && bytes <= t.ll128_rsag_max)
    return Route::LL128Lines;
  if (c != Collective::AllReduce) return Route::Other;
  if (forced != Route::Other) return forced;
  // A registered output: large calls take the pipe, whose all-gather then stores into the
  // peers' outputs directly (no copy out of the workspace); measured from 32 MiB on 2 ranks
  // (tests/gpu/TUNING.md row 22), and on 4 it ties the LL128 two-shot at 32 MiB and beats it
  // by 6% at 64 MiB (row 32).
  if (registered_output && bytes >= t.reg_pipe_min) return Route::Pipe;
  // One-shot algorithms move (world-1) copies of the message out of every rank, so their
  // thresholds shrink with the world (measured for 2 ranks; a guess beyond). With 2 ranks
  // one-shot and two-shot move the same bytes; with more, the one-shot moves world/2 times
  // the two-shot's, so its range ends at the push's old limit (4 MiB x 2/world).
  const size_t scale = size_t(world);
  if (bytes <= t.ll_max * 2 / scale) return Route::OneShot;
  // With more than 2 ranks the LL128 two-shot moves 2 (world-1)/world copies out of each rank
  // instead of world - 1, without the pipe's per-tile flag rounds.
  if (scale > 2 && bytes >= twoshot_ll128_min(world, t) && bytes <= t.ll128_twoshot_max) return Route::LL128TwoShot;
  const size_t ll128_max = scale == 2 ? t.ll128_max : std::min(t.ll128_max, t.push_max);
  if (bytes <= ll128_max * 2 / scale) return Route::LL128;
  if (bytes <= t.push_max * 2 / scale) return Route::Push;
  // Above that the pipelined two-shot (RS/AG of consecutive tiles overlapped per CTA); it
  // measured as fast or faster than the plain two-shot from 2 MiB up on 2 ranks.
  if (bytes >= t.pipe_min) return Route::Pipe;
  return Route::TwoShot;
}

std::string route_name(Route r, Collective c) {
  switch (r) {
    case Route::Copy: return "copy";
    case Route::OneShot: return "oneshot";
    case Route::Push: return "oneshot_push";
    case Route::TwoShot: return "twoshot";
    case Route::Pipe: return "twoshot_pipe";
    case Route::LL128: return "oneshot_ll128";
    case Route::LL128TwoShot: return "twoshot_ll128";
    case Route::LL128Lines: return c == Collective::ReduceScatter ? "reduce_scatter_ll128" : "allgather_ll128";
    case Route::Other: break;
  }
  switch (c) {
    case Collective::ReduceScatter: return "reduce_scatter_push";
    case Collective::AllGather: return "allgather_push";
    case Collective::Broadcast: return "broadcast_push";
    case Collective::Barrier: return "barrier_flags";
    case Collective::AllReduce: break;  // pick_route always names an all-reduce route
    case Collective::AllToAll:
    case Collective::Gather:
    case Collective::Scatter: return "exchange_push";
    case Collective::Reduce: return "reduce_push";
    case Collective::Send:
    case Collective::Recv:
    case Collective::SendRecv:
    case Collective::AllToAllV: return "none";  // not on the NVLink path (CudaBackend::run_more)
  }
  return "auto";
}

}  // namespace actorcc::cuda
