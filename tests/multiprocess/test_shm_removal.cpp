// A forming group's shared memory and the other processes on the host. A
// process in another pid namespace sharing /dev/shm (docker --ipc=host, unshare -p) sees no
// creator pid and used to remove a live group's segment as an orphan; the group then failed only
// at the join timeout, naming ranks that were alive. Now the segment survives any sweep while its
// creator lives, and a segment that disappears anyway fails every rank at once, saying so.
#include <cstdlib>

#include "procs.hpp"

namespace {

using namespace mp;

// Far above the bounds below: the old code waited this long for a segment that was gone.
constexpr int kJoinTimeoutMs = 20000;
constexpr int kWorld = 3;
constexpr int kCulprit = 1;  // a local rank other than the segment's creator (local rank 0)

double run_group(Procs& p, const std::string& phase) {
  const std::string id = new_id();
  for (int r = 0; r < kWorld; ++r)
    p.spawn(worker_args(id, r, kWorld, "shm_removal",
                        {"--culprit", std::to_string(kCulprit), "--phase", phase, "--join-timeout-ms",
                         std::to_string(kJoinTimeoutMs), "--timeout-ms", std::to_string(kJoinTimeoutMs)}));
  const auto t0 = Clock::now();
  EXPECT_TRUE(p.wait_all(60s)) << p.report();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The segment is removed after its creator announced it, before rank 1 maps it: every rank fails
// within seconds with the cause (the worker checks the text names the removal and rank 1).
TEST(ShmRemoval, SegmentRemovedDuringSetupFailsEveryRankAtOnce) {
  Procs p;
  const double secs = run_group(p, "removed");
  for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(p[r].exited_with(0)) << "rank " << r << "\n" << p.report();
  EXPECT_LT(secs, 10.0) << p.report();
  EXPECT_TRUE(p.leaked_segments().empty()) << "leaked shm: " << p.leaked_segments().front();
}

// Before rank 1 maps the segment, a group of one forms in another pid namespace (its setup sweeps
// /dev/shm for orphans, and the creator's pid does not exist there): the segment must survive
// and the group form with exact results.
TEST(ShmRemoval, SweepFromAnotherPidNamespaceLeavesAFormingGroupAlone) {
  if (std::system("unshare --pid --fork --mount-proc true >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "unshare --pid is not permitted here (needs root)";
  Procs p;
  run_group(p, "pidns_sweep");
  expect_all_exit_zero(p);
  EXPECT_NE(p[kCulprit].err().find("the sweeper in another pid namespace exited with 0"), std::string::npos)
      << p.report();
}

}  // namespace
