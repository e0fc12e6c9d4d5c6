// The CUDA planner's routes (core/cuda_planner.cpp): the thresholds tests/gpu/TUNING.md measured,
// at the edges where each route hands over, for 2 ranks and for the worlds beyond.
#include <gtest/gtest.h>

#include "core/cuda_planner.hpp"

using namespace actorcc;
using cuda::Route;

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;

Route all_reduce(size_t bytes, int world, bool registered = false, const cuda::Tuning& t = {}) {
  return cuda::pick_route(Collective::AllReduce, bytes, registered, world, t, Route::Other);
}

}  // namespace

TEST(CudaPlanner, OneRankCopiesEveryCollective) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather, Collective::Broadcast})
    EXPECT_EQ(cuda::pick_route(c, 4 * KiB, false, 1, {}, Route::Other), Route::Copy);
}

TEST(CudaPlanner, TwoRanksAllReduce) {
  EXPECT_EQ(all_reduce(4, 2), Route::OneShot);
  EXPECT_EQ(all_reduce(64 * KiB, 2), Route::OneShot);
  EXPECT_EQ(all_reduce(64 * KiB + 4, 2), Route::LL128);
  EXPECT_EQ(all_reduce(16 * MiB, 2), Route::LL128);
  EXPECT_EQ(all_reduce(64 * MiB, 2), Route::LL128);
  EXPECT_EQ(all_reduce(64 * MiB + 4, 2), Route::Pipe);
  EXPECT_EQ(all_reduce(1024 * MiB, 2), Route::Pipe);
  // never the LL128 two-shot: with 2 ranks it moves the one-shot's bytes with one more hop
  for (size_t b = KiB; b <= 1024 * MiB; b *= 2) EXPECT_NE(all_reduce(b, 2), Route::LL128TwoShot) << b;
}

TEST(CudaPlanner, RegisteredOutputsTakeThePipeFrom32MiBAtEveryWorld) {
  for (int w : {2, 3, 4, 8}) {
    EXPECT_EQ(all_reduce(32 * MiB, w, true), Route::Pipe) << w;
    EXPECT_NE(all_reduce(32 * MiB - 4, w, true), Route::Pipe) << w;
    EXPECT_EQ(all_reduce(32 * MiB - 4, w, true), all_reduce(32 * MiB - 4, w)) << w;
  }
}

TEST(CudaPlanner, FourRanksTakeTheLL128TwoShotFrom512KiBTo64MiB) {
  EXPECT_EQ(all_reduce(32 * KiB, 4), Route::OneShot);
  EXPECT_EQ(all_reduce(32 * KiB + 4, 4), Route::LL128);
  EXPECT_EQ(all_reduce(512 * KiB - 4, 4), Route::LL128);
  EXPECT_EQ(all_reduce(512 * KiB, 4), Route::LL128TwoShot);
  EXPECT_EQ(all_reduce(64 * MiB, 4), Route::LL128TwoShot);
  EXPECT_EQ(all_reduce(64 * MiB + 4, 4), Route::Pipe);
}

TEST(CudaPlanner, OtherWorldsScaleTheTwoShotsStartByTheModel) {
  // 4 ranks' 512 KiB x W / ((W-1)(W-2)) x 3/2: 3 ranks 2.25x, 8 ranks 2/7 x
  cuda::Tuning t;
  EXPECT_EQ(cuda::twoshot_ll128_min(4, t), 512 * KiB);
  EXPECT_EQ(cuda::twoshot_ll128_min(3, t), 1152 * KiB);
  EXPECT_EQ(cuda::twoshot_ll128_min(8, t), 512 * KiB * 24 / 84);
  EXPECT_EQ(all_reduce(1152 * KiB - 4, 3), Route::LL128);
  EXPECT_EQ(all_reduce(1152 * KiB, 3), Route::LL128TwoShot);
  EXPECT_EQ(all_reduce(16 * KiB, 8), Route::OneShot);
  EXPECT_EQ(all_reduce(cuda::twoshot_ll128_min(8, t) - 4, 8), Route::LL128);
  EXPECT_EQ(all_reduce(cuda::twoshot_ll128_min(8, t), 8), Route::LL128TwoShot);
  EXPECT_EQ(all_reduce(256 * MiB, 8), Route::Pipe);
}

TEST(CudaPlanner, ReduceScatterAndAllGatherMoveLL128LinesUnlessCapped) {
  for (int w : {2, 4, 8})
    for (size_t b : {size_t(4), 64 * KiB, 16 * MiB, 1024 * MiB}) {
      EXPECT_EQ(cuda::pick_route(Collective::ReduceScatter, b, false, w, {}, Route::Other), Route::LL128Lines);
      EXPECT_EQ(cuda::pick_route(Collective::AllGather, b, false, w, {}, Route::Other), Route::LL128Lines);
    }
  cuda::Tuning capped;
  capped.ll128_rsag_max = 1;
  EXPECT_EQ(cuda::pick_route(Collective::ReduceScatter, 4 * KiB, false, 2, capped, Route::Other), Route::Other);
  EXPECT_EQ(cuda::route_name(Route::Other, Collective::ReduceScatter), "reduce_scatter_push");
  EXPECT_EQ(cuda::route_name(Route::Other, Collective::AllGather), "allgather_push");
  EXPECT_EQ(cuda::route_name(Route::LL128Lines, Collective::ReduceScatter), "reduce_scatter_ll128");
  EXPECT_EQ(cuda::route_name(Route::LL128Lines, Collective::AllGather), "allgather_ll128");
  EXPECT_EQ(cuda::pick_route(Collective::Broadcast, 4 * KiB, false, 2, {}, Route::Other), Route::Other);
  EXPECT_EQ(cuda::route_name(Route::Other, Collective::Broadcast), "broadcast_push");
}

TEST(CudaPlanner, ForcedNamesAndAliasesOverrideOnlyTheAllReduce) {
  const std::pair<const char*, Route> names[] = {
      {"oneshot", Route::OneShot},         {"ll", Route::OneShot},          {"oneshot_ll", Route::OneShot},
      {"oneshot_push", Route::Push},       {"push", Route::Push},           {"twoshot", Route::TwoShot},
      {"two_shot", Route::TwoShot},        {"twoshot_pipe", Route::Pipe},   {"pipe", Route::Pipe},
      {"oneshot_ll128", Route::LL128},     {"ll128", Route::LL128},         {"twoshot_ll128", Route::LL128TwoShot},
      {"ll128_twoshot", Route::LL128TwoShot}};
  for (const auto& [name, route] : names) {
    bool known = false;
    const Route forced = cuda::forced_route(name, known);
    EXPECT_TRUE(known) << name;
    EXPECT_EQ(forced, route) << name;
    EXPECT_EQ(cuda::pick_route(Collective::AllReduce, 256 * MiB, true, 4, {}, forced), route) << name;
    EXPECT_EQ(cuda::pick_route(Collective::AllGather, 4 * KiB, false, 4, {}, forced), Route::LL128Lines) << name;
    // plan() names the route by its canonical name, which forces it again
    bool again = false;
    EXPECT_EQ(cuda::forced_route(cuda::route_name(route, Collective::AllReduce), again), route) << name;
  }
  for (const char* planner : {"", "auto"}) {
    bool known = false;
    EXPECT_EQ(cuda::forced_route(planner, known), Route::Other);
    EXPECT_TRUE(known);
  }
  bool known = true;
  EXPECT_EQ(cuda::forced_route("ring", known), Route::Other);
  EXPECT_FALSE(known);
}
