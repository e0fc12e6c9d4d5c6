// What gpu_launch gives every worker it starts, in the environment: the worker's rank, the
// world, and the group ids (gpu_launch's --ids N UniqueIds, comma-separated, the same on every
// rank: one per communicator a worker may make). gpu_launch.cpp writes these names and the
// workers (gpu_worker, gpu_async_errors) read them here.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace gpu_launch {

inline constexpr const char* kRank = "ACTORCC_TEST_RANK";
inline constexpr const char* kWorld = "ACTORCC_TEST_WORLD";
inline constexpr const char* kIds = "ACTORCC_TEST_IDS";

struct Env {
  int rank = 0;
  int world = 1;
  std::vector<std::string> ids;  // at least one
};

// The worker's side. Without gpu_launch's words it says so on stderr, naming `worker`, and
// gives nullopt (the worker then exits 2).
inline std::optional<Env> worker_env(const char* worker) {
  const char* r = std::getenv(kRank);
  const char* w = std::getenv(kWorld);
  const char* ids = std::getenv(kIds);
  if (!r || !w || !ids || !*ids) {
    std::fprintf(stderr, "%s must be started by gpu_launch (%s, %s and %s unset)\n", worker, kRank, kWorld, kIds);
    return std::nullopt;
  }
  Env e{std::atoi(r), std::atoi(w), {}};
  std::stringstream ss(ids);
  for (std::string x; std::getline(ss, x, ',');) e.ids.push_back(x);
  return e;
}

}  // namespace gpu_launch
