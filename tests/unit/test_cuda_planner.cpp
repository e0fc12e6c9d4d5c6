// The CUDA planner's routes (algorithms/cuda/planner.cpp): the thresholds docs/perf/tuning.md measured,
// at the edges where each route hands over, for 2 ranks and for the worlds beyond.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actorcc/error.hpp"
#include "algorithms/cuda/planner.hpp"

using namespace actorcc;
using cuda::Route;

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;

Route pick(Collective c, size_t bytes, bool registered, int world, const cuda::Tuning& t = {},
           std::optional<Route> forced = std::nullopt) {
  return cuda::pick_route(cuda::plan_args(c, bytes, registered, world), t, forced);
}

Route all_reduce(size_t bytes, int world, bool registered = false, const cuda::Tuning& t = {}) {
  return pick(Collective::AllReduce, bytes, registered, world, t);
}

}  // namespace

TEST(CudaPlanner, OneRankCopiesEveryCollective) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather, Collective::Broadcast})
    EXPECT_EQ(pick(c, 4 * KiB, false, 1), Route::Copy);
}

TEST(CudaPlanner, TwoRanksAllReduce) {
  EXPECT_EQ(all_reduce(4, 2), Route::OneShot);
  EXPECT_EQ(all_reduce(64 * KiB, 2), Route::OneShot);
  EXPECT_EQ(all_reduce(64 * KiB + 4, 2), Route::OneShotLL128);
  EXPECT_EQ(all_reduce(16 * MiB, 2), Route::OneShotLL128);
  EXPECT_EQ(all_reduce(64 * MiB, 2), Route::OneShotLL128);
  EXPECT_EQ(all_reduce(64 * MiB + 4, 2), Route::TwoShotPipe);
  EXPECT_EQ(all_reduce(1024 * MiB, 2), Route::TwoShotPipe);
  // never the LL128 two-shot: with 2 ranks it moves the one-shot's bytes with one more hop
  for (size_t b = KiB; b <= 1024 * MiB; b *= 2) EXPECT_NE(all_reduce(b, 2), Route::TwoShotLL128) << b;
}

TEST(CudaPlanner, RegisteredOutputsTakeThePipeFrom32MiBAtEveryWorld) {
  for (int w : {2, 3, 4, 8}) {
    EXPECT_EQ(all_reduce(32 * MiB, w, true), Route::TwoShotPipe) << w;
    EXPECT_NE(all_reduce(32 * MiB - 4, w, true), Route::TwoShotPipe) << w;
    EXPECT_EQ(all_reduce(32 * MiB - 4, w, true), all_reduce(32 * MiB - 4, w)) << w;
  }
}

TEST(CudaPlanner, FourRanksTakeTheLL128TwoShotFrom512KiBTo64MiB) {
  EXPECT_EQ(all_reduce(32 * KiB, 4), Route::OneShot);
  EXPECT_EQ(all_reduce(32 * KiB + 4, 4), Route::OneShotLL128);
  EXPECT_EQ(all_reduce(512 * KiB - 4, 4), Route::OneShotLL128);
  EXPECT_EQ(all_reduce(512 * KiB, 4), Route::TwoShotLL128);
  EXPECT_EQ(all_reduce(64 * MiB, 4), Route::TwoShotLL128);
  EXPECT_EQ(all_reduce(64 * MiB + 4, 4), Route::TwoShotPipe);
}

TEST(CudaPlanner, OtherWorldsScaleTheTwoShotsStartByTheModel) {
  // 4 ranks' 512 KiB x W / ((W-1)(W-2)) x 3/2: 3 ranks 2.25x, 8 ranks 2/7 x
  cuda::Tuning t;
  EXPECT_EQ(cuda::twoshot_ll128_min(4, t), 512 * KiB);
  EXPECT_EQ(cuda::twoshot_ll128_min(3, t), 1152 * KiB);
  EXPECT_EQ(cuda::twoshot_ll128_min(8, t), 512 * KiB * 24 / 84);
  EXPECT_EQ(all_reduce(1152 * KiB - 4, 3), Route::OneShotLL128);
  EXPECT_EQ(all_reduce(1152 * KiB, 3), Route::TwoShotLL128);
  EXPECT_EQ(all_reduce(16 * KiB, 8), Route::OneShot);
  EXPECT_EQ(all_reduce(cuda::twoshot_ll128_min(8, t) - 4, 8), Route::OneShotLL128);
  EXPECT_EQ(all_reduce(cuda::twoshot_ll128_min(8, t), 8), Route::TwoShotLL128);
  EXPECT_EQ(all_reduce(256 * MiB, 8), Route::TwoShotPipe);
}

TEST(CudaPlanner, ReduceScatterAndAllGatherMoveLL128LinesUnlessCapped) {
  for (int w : {2, 4, 8})
    for (size_t b : {size_t(4), 64 * KiB, 16 * MiB, 1024 * MiB}) {
      EXPECT_EQ(pick(Collective::ReduceScatter, b * w, false, w), Route::ReduceScatterLL128);
      EXPECT_EQ(pick(Collective::AllGather, b * w, false, w), Route::AllGatherLL128);
    }
  cuda::Tuning capped;
  capped.ll128_rsag_max = 1;
  EXPECT_EQ(pick(Collective::ReduceScatter, 4 * KiB, false, 2, capped), Route::ReduceScatterPush);
  EXPECT_EQ(cuda::route_name(Route::ReduceScatterPush), "reduce_scatter_push");
  EXPECT_EQ(cuda::route_name(Route::AllGatherPush), "allgather_push");
  EXPECT_EQ(cuda::route_name(Route::ReduceScatterLL128), "reduce_scatter_ll128");
  EXPECT_EQ(cuda::route_name(Route::AllGatherLL128), "allgather_ll128");
  EXPECT_EQ(pick(Collective::Broadcast, 4 * KiB, false, 2), Route::BroadcastPush);
  EXPECT_EQ(cuda::route_name(Route::BroadcastPush), "broadcast_push");
}

TEST(CudaPlanner, ForcedNamesAndAliasesOverrideOnlyTheAllReduce) {
  const std::pair<const char*, Route> names[] = {
      {"oneshot", Route::OneShot},           {"ll", Route::OneShot},             {"oneshot_ll", Route::OneShot},
      {"oneshot_push", Route::OneShotPush},  {"push", Route::OneShotPush},       {"twoshot", Route::TwoShot},
      {"two_shot", Route::TwoShot},          {"twoshot_pipe", Route::TwoShotPipe}, {"pipe", Route::TwoShotPipe},
      {"oneshot_ll128", Route::OneShotLL128}, {"ll128", Route::OneShotLL128},    {"twoshot_ll128", Route::TwoShotLL128},
      {"ll128_twoshot", Route::TwoShotLL128}};
  for (const auto& [name, route] : names) {
    bool known = false;
    const auto forced = cuda::forced_route(name, known);
    EXPECT_TRUE(known) << name;
    EXPECT_EQ(forced, route) << name;
    EXPECT_EQ(pick(Collective::AllReduce, 256 * MiB, true, 4, {}, forced), route) << name;
    EXPECT_EQ(pick(Collective::AllGather, 4 * KiB, false, 4, {}, forced), Route::AllGatherLL128) << name;
    // plan() names the route by its canonical name, which forces it again
    bool again = false;
    EXPECT_EQ(cuda::forced_route(cuda::route_name(route), again), route) << name;
  }
  for (const char* planner : {"", "auto"}) {
    bool known = false;
    EXPECT_EQ(cuda::forced_route(planner, known), std::nullopt);
    EXPECT_TRUE(known);
  }
  bool known = true;
  EXPECT_EQ(cuda::forced_route("ring", known), std::nullopt);
  EXPECT_FALSE(known);
}

TEST(CudaPlanner, EveryPickedRouteCanRunTheCall) {
  const Collective colls[] = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                              Collective::Broadcast, Collective::Barrier,  Collective::Reduce,
                              Collective::AllToAll,  Collective::Gather,   Collective::Scatter};
  std::vector<std::optional<Route>> forced = {std::nullopt};
  for (const char* name : {"oneshot", "oneshot_push", "oneshot_ll128", "twoshot", "twoshot_pipe", "twoshot_ll128"}) {
    bool known = false;
    forced.push_back(cuda::forced_route(name, known));
    ASSERT_TRUE(known) << name;
  }
  size_t checked = 0;
  for (Collective c : colls)
    for (int w = 1; w <= 8; ++w)
      for (size_t esz : {1, 2, 4, 8})
        for (size_t elems : {size_t(1), size_t(3), size_t(1000), 16 * KiB + 1, MiB, 16 * MiB + 5})
          for (uintptr_t addr : {0, 1, 2, 4, 8, 12, 256})
            for (bool reg : {false, true})
              for (const auto& f : forced) {
                cuda::RouteArgs a;
                a.coll = c;
                a.esz = esz;
                a.bytes = elems * esz * (c == Collective::ReduceScatter || c == Collective::AllGather ? w : 1);
                a.world = w;
                a.registered = reg;
                a.addr = addr;
                const Route r = cuda::pick_route(a, {}, f);
                ASSERT_TRUE(cuda::can_run(r, a)) << cuda::route_name(r) << " " << to_string(c) << " w" << w << " esz"
                                                 << esz << " bytes " << a.bytes << " addr " << addr;
                ++checked;
              }
  EXPECT_EQ(checked, 9u * 8 * 4 * 6 * 7 * 2 * 7);
}

// The collectives added with point-to-point: the byte-push routes (one per collective, each its
// own row and file), a copy on one rank.
TEST(CudaPlanner, RootedAndExchangeCollectivesTakeTheirPushRoutes) {
  const std::pair<Collective, Route> want[] = {{Collective::Reduce, Route::ReducePush},
                                               {Collective::AllToAll, Route::AllToAllPush},
                                               {Collective::Gather, Route::GatherPush},
                                               {Collective::Scatter, Route::ScatterPush},
                                               {Collective::Send, Route::SendPush},
                                               {Collective::Recv, Route::RecvPush},
                                               {Collective::SendRecv, Route::SendRecvPush},
                                               {Collective::AllToAllV, Route::AllToAllVPush}};
  for (const auto& [c, r] : want) {
    EXPECT_TRUE(cuda::has_route(c)) << to_string(c);
    EXPECT_EQ(cuda::route_name(r), std::string(to_string(c)) + "_push");
    for (int w = 2; w <= 8; ++w)
      for (size_t bytes : {size_t(1), 4 * KiB + 3, 64 * MiB}) EXPECT_EQ(pick(c, bytes, false, w), r) << to_string(c);
    EXPECT_EQ(pick(c, 4 * KiB, false, 1), Route::Copy);
    // An ACTORCC_ALGO for the all-reduce never moves them.
    bool known = false;
    EXPECT_EQ(pick(c, 4 * KiB, false, 4, {}, cuda::forced_route("oneshot", known)), r);
    for (Collective other : {Collective::AllReduce, Collective::Broadcast}) {
      cuda::RouteArgs a = cuda::plan_args(other, 4 * KiB, false, 4);
      EXPECT_FALSE(cuda::can_run(r, a)) << cuda::route_name(r) << " ran " << to_string(other);
    }
  }
}

// Before the route table these choices were made inside oneshot_ll128.cu and twoshot_ll128.cu,
// so plan() named an LL128 route while the push or the pipe ran.
TEST(CudaPlanner, LL128RoutesGiveWayForBuffersTheLinesCannotCarry) {
  auto args = [](Collective c, size_t bytes, int w, size_t esz, uintptr_t addr) {
    cuda::RouteArgs a = cuda::plan_args(c, bytes, false, w);
    a.esz = esz;
    a.addr = addr;
    return a;
  };
  // 2-byte elements on a 2-byte boundary: the lines move 4-byte words
  EXPECT_EQ(cuda::pick_route(args(Collective::AllReduce, MiB, 2, 2, 0), {}), Route::OneShotLL128);
  EXPECT_EQ(cuda::pick_route(args(Collective::AllReduce, MiB, 2, 2, 2), {}), Route::OneShotPush);
  EXPECT_EQ(cuda::pick_route(args(Collective::AllReduce, 16 * MiB, 2, 2, 2), {}), Route::TwoShotPipe);
  // 8-byte elements on a 4-byte boundary
  EXPECT_EQ(cuda::pick_route(args(Collective::AllReduce, MiB, 2, 8, 4), {}), Route::OneShotPush);
  EXPECT_EQ(cuda::pick_route(args(Collective::AllReduce, MiB, 2, 4, 4), {}), Route::OneShotLL128);
  // the LL128 two-shot (4 ranks) gives way to the pipe
  EXPECT_EQ(cuda::pick_route(args(Collective::AllReduce, MiB, 4, 4, 0), {}), Route::TwoShotLL128);
  EXPECT_EQ(cuda::pick_route(args(Collective::AllReduce, MiB, 4, 4, 1), {}), Route::TwoShotPipe);
  // forced the same way: oneshot_ll128 to the push up to push_max * 2/world, the pipe above
  bool known = false;
  const auto ll128 = cuda::forced_route("oneshot_ll128", known);
  EXPECT_EQ(cuda::pick_route(args(Collective::AllReduce, 4 * MiB, 2, 1, 1), {}, ll128), Route::OneShotPush);
  EXPECT_EQ(cuda::pick_route(args(Collective::AllReduce, 4 * MiB + 1, 2, 1, 1), {}, ll128), Route::TwoShotPipe);
  EXPECT_EQ(cuda::pick_route(args(Collective::AllReduce, 4 * MiB + 1, 2, 1, 0), {}, ll128), Route::OneShotLL128);
  // reduce_scatter / all_gather: each rank's chunk must be a multiple of 4 bytes (and of 8-byte elements)
  EXPECT_EQ(cuda::pick_route(args(Collective::ReduceScatter, 2 * 6, 2, 2, 0), {}), Route::ReduceScatterPush);
  EXPECT_EQ(cuda::pick_route(args(Collective::ReduceScatter, 2 * 8, 2, 2, 0), {}), Route::ReduceScatterLL128);
  EXPECT_EQ(cuda::pick_route(args(Collective::AllGather, 3 * 3, 3, 1, 0), {}), Route::AllGatherPush);
  EXPECT_EQ(cuda::pick_route(args(Collective::AllGather, 3 * 8, 3, 8, 4), {}), Route::AllGatherPush);
  EXPECT_EQ(cuda::pick_route(args(Collective::AllGather, 3 * 8, 3, 8, 8), {}), Route::AllGatherLL128);
}
