// Elastic membership on the CPU backend (docs/elastic.md): a rank is SIGKILLed between
// calls or inside a large call, the survivors shrink without it and run every collective exactly,
// then grow back to full size with a new process taking the dead rank's place, exact again; a
// death inside a shrink and inside a grow; a planned shrink whose excluded rank, still alive, is
// refused; the death of the process hosting the root; virtual nodes (the hierarchical path);
// 20 shrink/grow cycles without a leak; the time from a SIGKILL to the survivors' first correct
// collective. The scenarios themselves: mp_worker --mode elastic (elastic.cpp).
#include <algorithm>
#include <tuple>

#include <iomanip>
#include <sstream>

#include "procs.hpp"

namespace {

using namespace mp;

struct Scenario {
  int world = 4;
  std::string phase;
  int culprit = 3;
  int victim = -1;           // shrink_kill: the rank that dies inside the shrink
  std::string nodes;         // ACTORCC_NODE_ID per rank, "" for one host
  int port = 0;              // > 0: from_address, rank 0 hosting the root
  std::vector<std::string> extra = {};
};

struct Outcome {
  double kill_to_first_ok = -1;  // s, the slowest survivor
  double rejoin = -1;            // s, the newcomer: ready to call -> first correct collective
};

// The value after `key ` on the last line that has it, -1 if none.
int64_t value_of(const std::string& out, const std::string& key) {
  int64_t v = -1;
  std::istringstream is(out);
  for (std::string line; std::getline(is, line);)
    if (line.rfind(key + " ", 0) == 0) v = std::stoll(line.substr(key.size() + 1));
  return v;
}

std::vector<std::string> lines_of(const std::string& out, const std::string& key) {
  std::vector<std::string> v;
  std::istringstream is(out);
  for (std::string line; std::getline(is, line);)
    if (line.rfind(key + " ", 0) == 0) v.push_back(line.substr(key.size() + 1));
  return v;
}

std::vector<std::string> common_args(const Scenario& s) {
  std::vector<std::string> a = {"--phase", s.phase, "--culprit", std::to_string(s.culprit), "--timeout-ms", "10000",
                                "--join-timeout-ms", "5000", "--counts", "0,1,7,4097", "--hold-ms", "700"};
  if (s.victim >= 0) a.insert(a.end(), {"--victim", std::to_string(s.victim)});
  a.insert(a.end(), s.extra.begin(), s.extra.end());
  return a;
}

std::vector<std::string> env_of(const Scenario& s, int rank) {
  if (s.nodes.empty()) return {};
  return {std::string("ACTORCC_NODE_ID=") + s.nodes[rank]};
}

Outcome run(const Scenario& s) {
  const std::string id = s.port ? "-" : new_id();
  Procs p;
  for (int r = 0; r < s.world; ++r) {
    auto extra = common_args(s);
    if (s.port) extra.insert(extra.end(), {"--port", std::to_string(s.port)});
    p.spawn(worker_args(id, r, s.world, "elastic", extra), env_of(s, r));
  }
  // Newcomers: one per GROW_ID a survivor prints, taking the dead rank's place (grow_kill: the
  // first one dies in the grown group's setup).
  std::vector<size_t> must_die;
  if (s.phase != "planned" && s.phase != "mismatch") must_die.push_back(static_cast<size_t>(s.culprit));
  if (s.phase == "shrink_kill" || s.phase == "kill_two" || s.phase == "shrink_die" || s.phase == "grow_root_dies")
    must_die.push_back(static_cast<size_t>(s.victim));
  std::vector<size_t> newcomers;
  size_t ids_seen = 0;
  const auto end = Clock::now() + 100s;
  for (;;) {
    std::vector<std::string> ids;
    for (int r = 0; r < s.world; ++r)
      for (auto& l : lines_of(p[r].out(), "GROW_ID")) ids.push_back(l);
    for (; ids_seen < ids.size(); ++ids_seen) {
      const bool dies = s.phase == "grow_kill" && ids_seen == 0;
      auto extra = common_args(s);
      extra[1] = dies ? "newcomer_dies" : s.phase == "grow_root_dies" ? "newcomer_root_dies" : "newcomer";
      newcomers.push_back(p.workers().size());
      if (dies) must_die.push_back(p.workers().size());
      p.spawn(worker_args(ids[ids_seen], s.culprit, s.world, "elastic", extra), env_of(s, s.culprit));
    }
    bool all = true;
    p.wait_all(0ms);
    for (auto& w : p.workers()) all = all && w.done();
    if (all || Clock::now() > end) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(p.wait_all(1ms)) << "workers did not finish\n" << p.report();
  for (size_t i = 0; i < p.workers().size(); ++i) {
    const bool dies = std::find(must_die.begin(), must_die.end(), i) != must_die.end();
    if (dies) EXPECT_TRUE(p[i].done() && WIFSIGNALED(p[i].status)) << "worker " << i << " should have died\n" << p.report();
    else EXPECT_TRUE(p[i].exited_with(0)) << "worker " << i << "\n" << p.report();
  }
  EXPECT_TRUE(p.leaked_segments().empty()) << "leaked shm: " << p.leaked_segments().front();
  Outcome o;
  const int64_t fault = value_of(p[s.culprit].out(), "FAULT_AT");
  int64_t last_ok = -1;
  for (int r = 0; r < s.world; ++r)
    if (r != s.culprit) last_ok = std::max(last_ok, value_of(p[r].out(), "FIRST_OK"));
  if (fault > 0 && last_ok > 0) o.kill_to_first_ok = (last_ok - fault) / 1e9;
  if (!newcomers.empty()) {
    const std::string out = p[newcomers.back()].out();
    const int64_t ready = value_of(out, "READY"), back = value_of(out, "REJOINED");
    if (ready > 0 && back > 0) o.rejoin = (back - ready) / 1e9;
  }
  std::cout << "elastic " << s.phase << " world " << s.world << (s.nodes.empty() ? "" : " nodes " + s.nodes)
            << ": SIGKILL -> first correct collective of the shrunk group " << o.kill_to_first_ok
            << " s; newcomer ready -> first correct collective " << o.rejoin << " s" << std::endl;
  return o;
}

TEST(Elastic, KillBetweenCallsShrinkThenGrowBack) {
  for (int world : {4, 8}) {
    auto o = run({world, "kill_between", world - 1});
    EXPECT_GT(o.kill_to_first_ok, 0);
    EXPECT_GT(o.rejoin, 0);
  }
}

TEST(Elastic, KillInsideALargeCallShrinkThenGrowBack) {
  for (int world : {4, 8}) run({world, "kill_large", 1});
}

// The victim dies in the new group's setup: once a rank that does not host the new root, once
// the lowest survivor, which hosts it.
TEST(Elastic, KillDuringShrinkFailsNamingItAndASecondShrinkWorks) {
  run({4, "shrink_kill", 3, 1});
  run({4, "shrink_kill", 0, 1});
}

// Two of six ranks SIGKILLed together. Every survivor's error comes to list both;
// the documented recipe (shrink without the error's culprits, again without any rank a failed
// shrink names) gives the four an exact all_reduce within 5 s of the kill, against a join timeout
// of 60 s that a shrink waiting for the second dead rank would spend. Then a survivor that dies
// while the others are inside the shrink, before it joined: named at once, not at the timeout.
TEST(Elastic, TwoDeathsAtOnceShrinkWithinSecondsNotTheJoinTimeout) {
  for (auto [phase, culprit, victim] : {std::tuple{"kill_two", 3, 4}, std::tuple{"kill_two", 0, 5},
                                         std::tuple{"shrink_die", 3, 1}, std::tuple{"shrink_die", 2, 0}}) {
    Scenario s{6, phase, culprit, victim};
    s.extra = {"--join-timeout-ms", "60000", "--hold-ms", "300"};
    const auto o = run(s);
    EXPECT_GT(o.kill_to_first_ok, 0) << phase;
    EXPECT_LT(o.kill_to_first_ok, 5.0) << phase << " " << culprit << "," << victim;
  }
}

// The process hosting a grown group's root (the member that called grow_id(): the
// shrunk group's rank 0, original rank 1 once rank 0 died) dies: every other member, the
// newcomer included, names it, and the shrink without it works.
TEST(Elastic, GrownGroupRootHostDeathNamesItsRank) { run({4, "grow_root_dies", 0, 1}); }

TEST(Elastic, KillDuringGrowFailsNamingItAndASecondGrowWorks) { run({4, "grow_kill", 2}); }

TEST(Elastic, PlannedShrinkRefusesTheExcludedRank) { run({4, "planned", 3}); }

// Survivors that pass different exclude lists: every one's shrink fails within its join timeout
// (1.5 s here), the odd one saying its list differs, the others naming it.
TEST(Elastic, SurvivorsWithDifferentExcludeListsFailNamingTheOddOne) {
  Scenario s{4, "mismatch", 3, 2};
  s.extra = {"--join-timeout-ms", "1500"};
  const auto t0 = Clock::now();
  run(s);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 10.0);
}

// The process hosting the root (rank 0, from_address) dies: the survivors shrink without it
// (rank 1 hosts the new root) and a newcomer takes rank 0 back.
TEST(Elastic, RootHostDeathThenShrinkAndGrow) { run({4, "kill_between", 0, -1, "", free_port()}); }

TEST(Elastic, VirtualNodesShrinkOnTheHierarchicalPath) {
  run({4, "kill_between", 3, -1, "aabb"});
  run({4, "kill_between", 1, -1, "abab"});
}

TEST(Elastic, TwentyCyclesLeakNothing) {
  TempDir d;
  Scenario s{4, "cycles", 3};
  s.extra = {"--cycles", "20", "--dir", d.path};
  const std::string id = new_id();
  Procs p;
  for (int r = 0; r < s.world; ++r) p.spawn(worker_args(id, r, s.world, "elastic", common_args(s)));
  ASSERT_TRUE(p.wait_all(100s)) << p.report();
  expect_all_exit_zero(p);
  for (int r = 0; r < s.world; ++r) std::cout << "rank " << r << " " << lines_of(p[r].out(), "USAGE").at(0) << "\n";
}

// The bar: at most 1 s from a SIGKILL to the survivors' first correct collective in the
// shrunk group, at 8 ranks on the CPU backend; median and max over the trials.
TEST(Elastic, KillToFirstCorrectCollectiveAtEightRanks) {
  constexpr int kTrials = 20;
  std::vector<double> t;
  for (int i = 0; i < kTrials; ++i) {
    auto o = run({8, "trial", 1 + i % 7});
    ASSERT_GT(o.kill_to_first_ok, 0);
    t.push_back(o.kill_to_first_ok);
  }
  std::sort(t.begin(), t.end());
  const double median = (t[kTrials / 2 - 1] + t[kTrials / 2]) / 2;
  std::cout << std::fixed << std::setprecision(3) << "ELASTIC kill->first correct collective, 8 ranks CPU, "
            << kTrials << " trials: median " << median << " s, max " << t.back() << " s" << std::endl;
  EXPECT_LE(median, 1.0);
  EXPECT_LE(t.back(), 2.0);  // the shared CI machine's scheduling, beyond the 1 s bar
}

}  // namespace
