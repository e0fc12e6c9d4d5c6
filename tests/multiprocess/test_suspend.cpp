// Communicator::suspend / resume on the CPU backend: the segment goes while
// suspended (unmapped on every rank, nothing in /dev/shm), calls are refused at once naming
// the suspension, 20 cycles stay exact and grow nothing, and ranks that disagree on the step
// all fail naming the odd rank, within seconds, and then go on; a rank that dies while
// suspended fails the others' resume naming it.
#include "procs.hpp"

namespace {

using namespace mp;

void run_group(int world, const std::string& phase, std::vector<std::string> extra = {}, int killed = -1) {
  const std::string id = new_id();
  Procs p;
  extra.insert(extra.end(), {"--phase", phase, "--timeout-ms", "20000", "--join-timeout-ms", "20000"});
  for (int r = 0; r < world; ++r) p.spawn(worker_args(id, r, world, "suspend", extra));
  const auto t0 = Clock::now();
  ASSERT_TRUE(p.wait_all(120s)) << "workers did not finish\n" << p.report();
  if (killed < 0) {
    expect_all_exit_zero(p);
  } else {
    for (int r = 0; r < world; ++r)
      if (r != killed) EXPECT_TRUE(p[r].exited_with(0)) << "rank " << r << "\n" << p.report();
    EXPECT_TRUE(p.leaked_segments().empty()) << "leaked shm: " << p.leaked_segments().front();
  }
  if (phase != "cycles") EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 15.0) << p.report();
}

TEST(Suspend, TwentyCyclesReleaseTheSegmentAndStayExact) { run_group(4, "cycles", {"--cycles", "20"}); }

TEST(Suspend, ASecondSuspendFailsOnEveryRankAndResumeGoesOn) { run_group(3, "again"); }

TEST(Suspend, ARankSuspendingWhileTheOthersResumeIsNamedByEveryRank) { run_group(3, "mixed", {"--culprit", "1"}); }

}  // namespace

namespace {

// The others learn of the death through the root, not at their join timeout (20 s here).
TEST(Suspend, ARankKilledWhileSuspendedFailsTheOthersResumeNamingIt) { run_group(3, "dies", {"--culprit", "2"}, 2); }

}  // namespace
