// The CUDA planner's route for a fixed list of calls, against tests/unit/data/planner_routes.txt:
// the table was generated from the planner as it stood before the route table existed, so a
// change of any planner choice shows up here. Set ACTORCC_PLANNER_ROUTES_OUT=<file> to write the
// current planner's table instead (e.g. to diff a deliberate threshold change).
//
// Columns: algo (ACTORCC_ALGO; "auto": the planner), collective, dtype, world, registered output,
// count (the call's count argument), bytes (what plan() is given: the message, or the full buffer
// for reduce_scatter / all_gather), then the route plan() named and the kernel that ran (they
// differed where an algorithm fell back to another inside it; the planner now makes that choice,
// so today's planner must name the second column's route, and the writer writes it twice).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/cuda/planner.hpp"

using namespace actorcc;

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;

struct Case {
  std::string algo;
  Collective coll;
  DataType dtype;
  int world;
  bool registered;
  size_t count;
  size_t bytes;
};

// Message sizes: 1 B to 1 GiB in x4 steps, odd sizes, and both sides of every threshold.
std::vector<size_t> sizes() {
  std::vector<size_t> s;
  for (size_t b = 1; b <= 1024 * MiB; b *= 4) s.push_back(b);
  for (size_t b : {size_t(3), size_t(1000), size_t(4097), 64 * KiB - 4, 64 * KiB + 4, 64 * KiB + 1, 512 * KiB - 4,
                   512 * KiB, 1152 * KiB - 4, 1152 * KiB, 4 * MiB - 4, 4 * MiB + 4, 32 * MiB - 4, 32 * MiB + 3,
                   64 * MiB - 4, 64 * MiB + 4, 100 * MiB + 7})
    s.push_back(b);
  return s;
}

// The planner sees a dtype only through its size.
constexpr DataType kOneOfEachSize[] = {DataType::Int8, DataType::Float16, DataType::Float32, DataType::Float64};

std::string key(const Case& c);

std::vector<Case> cases() {
  std::vector<Case> out;
  const Collective colls[] = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                              Collective::Broadcast, Collective::Barrier};
  auto add = [&](const std::string& algo, Collective c, DataType t, int w, bool reg, size_t b) {
    const size_t esz = dtype_size(t);
    const bool per_rank = c == Collective::ReduceScatter || c == Collective::AllGather;
    const size_t count = c == Collective::Barrier ? 0 : std::max<size_t>(1, (b + esz * (per_rank ? w : 1) - 1) /
                                                                                (esz * (per_rank ? w : 1)));
    out.push_back({algo, c, t, w, reg, count, count * esz * (per_rank ? w : 1)});
  };
  for (Collective c : colls)
    for (int w = 1; w <= 8; ++w)
      for (bool reg : {false, true}) {
        if (c == Collective::Barrier) {
          add("auto", c, DataType::Float32, w, reg, 0);
          continue;
        }
        for (DataType t : kOneOfEachSize)
          for (size_t b : sizes()) add("auto", c, t, w, reg, b);
      }
  // Forced all-reduce routes, one dtype of each size.
  for (const char* algo : {"oneshot", "oneshot_push", "twoshot", "twoshot_pipe", "oneshot_ll128", "twoshot_ll128"})
    for (int w : {2, 3, 8})
      for (bool reg : {false, true})
        for (DataType t : kOneOfEachSize)
          for (size_t b : sizes()) add(algo, Collective::AllReduce, t, w, reg, b);
  // Sizes that round to the same count are one case.
  std::set<std::string> seen;
  std::erase_if(out, [&](const Case& c) { return !seen.insert(key(c)).second; });
  return out;
}

std::string key(const Case& c) {
  std::ostringstream os;
  os << c.algo << ' ' << to_string(c.coll) << ' ' << to_string(c.dtype) << ' ' << c.world << ' ' << c.registered
     << ' ' << c.count << ' ' << c.bytes;
  return os.str();
}

// The route the planner picks for the case (buffers from cudaMalloc, so aligned), as run() asks
// (the call's element size) and as plan() asks (bytes only): both must name the same route.
std::pair<std::string, std::string> routes(const Case& c) {
  bool known = true;
  const cuda::Tuning t;
  const auto forced = cuda::forced_route(c.algo, known);
  cuda::RouteArgs ra = cuda::plan_args(c.coll, c.bytes, c.registered, c.world);
  const std::string planned = cuda::route_name(cuda::pick_route(ra, t, forced));
  ra.esz = dtype_size(c.dtype);
  const cuda::Route r = cuda::pick_route(ra, t, forced);
  EXPECT_TRUE(cuda::can_run(r, ra)) << key(c);
  return {planned, cuda::route_name(r)};
}

// Rows where plan() named one route and another ran before the route table: reduce_scatter /
// all_gather in LL128 lines with a chunk the lines cannot carry, which fell back to the push
// kernel inside the algorithm. plan() now names the push.
bool fell_back_before(const std::string& planned, const std::string& ran) {
  return (planned == "reduce_scatter_ll128" && ran == "reduce_scatter_push") ||
         (planned == "allgather_ll128" && ran == "allgather_push");
}

std::string table_path() { return std::string(ACTORCC_SOURCE_DIR) + "/tests/unit/data/planner_routes.txt"; }

}  // namespace

TEST(PlannerRoutes, ReproducesTheCommittedTable) {
  const auto all = cases();
  if (const char* out = std::getenv("ACTORCC_PLANNER_ROUTES_OUT")) {
    std::ofstream f(out);
    f << "# Written by tests/unit/test_planner_routes.cpp (ACTORCC_PLANNER_ROUTES_OUT); see its header.\n"
      << "# algo collective dtype world registered count bytes planned ran\n";
    for (const Case& c : all) {
      const auto [planned, ran] = routes(c);
      f << key(c) << ' ' << planned << ' ' << ran << '\n';  // equal since the route table
    }
    GTEST_SKIP() << "wrote " << all.size() << " rows to " << out;
  }
  std::ifstream f(table_path());
  ASSERT_TRUE(f) << table_path();
  std::map<std::string, std::pair<std::string, std::string>> table;
  for (std::string line; std::getline(f, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    std::string a, c, d, w, r, n, b, planned, ran;
    is >> a >> c >> d >> w >> r >> n >> b >> planned >> ran;
    table[a + ' ' + c + ' ' + d + ' ' + w + ' ' + r + ' ' + n + ' ' + b] = {planned, ran};
  }
  ASSERT_EQ(table.size(), all.size()) << "the table and the case list differ in length";
  size_t fallbacks = 0;
  for (const Case& c : all) {
    auto it = table.find(key(c));
    ASSERT_NE(it, table.end()) << key(c);
    const auto [planned, ran] = routes(c);
    // What runs is what ran before, and plan() names it.
    EXPECT_EQ(ran, it->second.second) << key(c);
    EXPECT_EQ(planned, ran) << key(c);
    if (it->second.first != it->second.second) {
      EXPECT_TRUE(fell_back_before(it->second.first, it->second.second)) << key(c);
      ++fallbacks;
    }
  }
  EXPECT_EQ(fallbacks, 828u) << "rows whose planned and run routes differed before";
}
