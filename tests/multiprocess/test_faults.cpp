// Fault injection on the CPU backend: one rank is SIGKILLed, SIGSTOPped, exits, or
// dies of an uncaught exception, before joining, while joining, during backend setup (after the
// join: the shared-memory segment, the TCP mesh of a group spanning virtual nodes), inside a
// large call or between calls, in groups of 4 and 8; and the process hosting the root dies. Every other rank must
// fail with an error naming the culprit within a bound (the join timeout where the culprit
// never arrives, the call timeout where it stalls, ~1-3 s otherwise), and nothing may be left
// in /dev/shm.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <regex>
#include <tuple>

#include "procs.hpp"

namespace {

using namespace mp;

struct Case {
  int world;
  std::string fault, phase;
  std::string nodes = {};  // ACTORCC_NODE_ID of each rank ("abab": ranks 0, 2 on a), "" for one host
};

std::string name_of(const ::testing::TestParamInfo<Case>& i) {
  return "w" + std::to_string(i.param.world) + "_" + i.param.fault + "_" + i.param.phase;
}

constexpr int kTimeoutMs = 2000;      // the call timeout (what catches a stopped rank)
constexpr int kJoinTimeoutMs = 3000;  // the join timeout (what catches a rank that never joins)

class Fault : public ::testing::TestWithParam<Case> {};

// Runs one case; `port` > 0 forms the group with from_address (rank 0 hosts the root).
void run_case(const Case& c, int culprit, int port) {
  const std::string id = port ? std::string() : new_id();
  Procs p;
  // The survivors of a during_join fault start late so the culprit is still joining when it
  // dies; the culprit's timer then fires before they arrive.
  const bool join_phase = c.phase == "during_join";
  for (int r = 0; r < c.world; ++r) {
    std::vector<std::string> extra = {"--culprit", std::to_string(culprit), "--fault", c.fault, "--phase", c.phase,
                                      "--timeout-ms", std::to_string(kTimeoutMs), "--join-timeout-ms",
                                      std::to_string(kJoinTimeoutMs), "--hold-ms",
                                      join_phase ? "300" : "700"};
    if (join_phase && r != culprit) extra.insert(extra.end(), {"--delay-ms", "1000"});
    if (port) extra.insert(extra.end(), {"--port", std::to_string(port)});
    std::vector<std::string> env;
    if (!c.nodes.empty()) env.push_back(std::string("ACTORCC_NODE_ID=") + c.nodes[r]);
    p.spawn(worker_args(id.empty() ? "-" : id, r, c.world, "fault", extra), env);
  }
  ASSERT_TRUE(p.wait_for_output({static_cast<size_t>(culprit)}, "FAULT", 60s)) << p.report();
  const auto t0 = Clock::now();
  std::vector<size_t> others;
  for (int r = 0; r < c.world; ++r)
    if (r != culprit) others.push_back(static_cast<size_t>(r));
  // Bound: a culprit that never joins is caught by the join timeout, a stopped one by the call
  // timeout (or the join timeout while joining); a dead or departed one at once.
  // Setup waits are bounded by the join timeout too.
  const bool setup_phase = c.phase == "during_setup" || c.phase == "during_mesh";
  double bound = 3.0;
  if (c.phase == "before_join" || (c.fault == "stop" && (join_phase || setup_phase)))
    bound = kJoinTimeoutMs / 1000.0 + 3.0;
  else if (c.fault == "stop") bound = kTimeoutMs / 1000.0 + 3.0;
  const auto end = t0 + std::chrono::milliseconds(static_cast<int>(bound * 1000) + 20000);
  for (;;) {
    p.wait_all(0ms);
    bool all = true;
    for (size_t r : others) all = all && p[r].done();
    if (all || Clock::now() > end) break;
    std::this_thread::sleep_for(20ms);
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  kill(p[culprit].pid, SIGKILL);  // a stopped culprit
  ASSERT_TRUE(p.wait_all(10s)) << p.report();
  for (size_t r : others) EXPECT_TRUE(p[r].exited_with(0)) << "rank " << r << " did not name rank " << culprit << "\n"
                                                          << p.report();
  EXPECT_LT(secs, bound) << "the others took " << secs << " s\n" << p.report();
  // A wait that timed out lists who had not arrived: that must be the culprit alone, never a
  // rank that arrived and gave up meanwhile.
  static const std::regex missing("ranks? ([0-9, ]+) of [0-9]+ ha(s|ve) not arrived");
  for (size_t r : others) {
    const std::string err = p[r].err();
    for (std::sregex_iterator m(err.begin(), err.end(), missing), e; m != e; ++m)
      EXPECT_EQ((*m)[1].str(), std::to_string(culprit)) << "rank " << r << " blames innocent ranks\n" << p.report();
  }
  EXPECT_TRUE(p.leaked_segments().empty()) << "leaked shm: " << p.leaked_segments().front();
  std::cout << name_of({c, 0}) << ": every other rank named rank " << culprit << " within " << secs << " s\n";
}

TEST_P(Fault, OthersNameTheCulpritInTimeAndNothingLeaks) {
  const Case& c = GetParam();
  // The shm creator (local rank 0) dies while joining or right after creating its segment, so
  // the segment's fate is tested too; in the mesh, the last rank (on the second node).
  run_case(c, c.phase == "during_join" || c.phase == "during_setup" ? 0 : c.world - 1, 0);
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (const char* f : {"kill", "stop", "exit", "throw"})
    for (const char* ph : {"before_join", "during_join", "large_call", "between_calls"}) v.push_back({4, f, ph});
  for (const char* f : {"kill", "stop", "exit", "throw"})
    for (const char* ph : {"before_join", "during_join", "large_call", "between_calls"}) v.push_back({8, f, ph});
  for (const char* f : {"kill", "stop", "exit", "throw"}) {
    v.push_back({4, f, "during_setup"});
    v.push_back({8, f, "during_setup"});
    v.push_back({4, f, "during_mesh", "abab"});
    v.push_back({8, f, "during_mesh", "aabbccdd"});
  }
  return v;
}
INSTANTIATE_TEST_SUITE_P(CpuBackend, Fault, ::testing::ValuesIn(cases()), name_of);

// The root lives in rank 0's process (from_address): when that process dies after the group
// formed, every other rank fails naming rank 0 (the root-lifetime contract, docs/reliability.md).
TEST(Fault, RootDeathIsNamedByEveryRank) {
  for (int world : {4, 8}) run_case({world, "kill", "between_calls"}, 0, free_port());
}

}  // namespace
