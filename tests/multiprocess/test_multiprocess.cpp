// Multiprocess tests of the CPU backend: this gtest process creates the UniqueId (so it hosts
// the root), spawns mp_worker processes with their own arguments, waits for them with a
// timeout, kills leftovers, and checks exit codes, stderr and /dev/shm.
#include <algorithm>
#include <iostream>
#include <random>
#include <sstream>

#include "procs.hpp"

namespace {

using namespace mp;

// Rank 0's case counts by call, dtype, op, world and size band (tests/common/tally.hpp), for
// the log, under a line naming the test they belong to.
void print_counts(Procs& p) {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::cout << "COUNT-OF " << test->test_suite_name() << "." << test->name() << "\n";
  std::istringstream out(p[0].out());
  for (std::string line; std::getline(out, line);)
    if (line.rfind("COUNT", 0) == 0) std::cout << line << "\n";
}

// ---------------------------------------------------------------------------------------
// The data matrix: every collective x dtype x op x count, in and out of place.

class Matrix : public ::testing::TestWithParam<int> {};

TEST_P(Matrix, EveryCollectiveDtypeOpCount) {
  const int world = GetParam();
  const std::string id = new_id();
  Procs p;
  // The full matrix at every world size: world 8 takes ~30 s on 2 shared cores (workers pass
  // --big-subset 1 to restrict the largest count to sum if that ever grows too slow).
  for (int r = 0; r < world; ++r) p.spawn(worker_args(id, r, world, "matrix", {"--timeout-ms", "60000"}));
  ASSERT_TRUE(p.wait_all(240s)) << "workers did not finish\n" << p.report();
  expect_all_exit_zero(p);
  print_counts(p);
}

INSTANTIATE_TEST_SUITE_P(Worlds, Matrix, ::testing::Values(2, 3, 4, 8),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

// Worlds 5-7 (slices that divide no power of two, uneven ranks per step): the whole matrix with
// a smaller top count, still past 1 MiB for every dtype's reduce_scatter and all_gather buffer.
class MatrixOddWorld : public ::testing::TestWithParam<int> {};

TEST_P(MatrixOddWorld, EveryCollectiveDtypeOpCount) {
  const int world = GetParam();
  const std::string id = new_id();
  Procs p;
  for (int r = 0; r < world; ++r)
    p.spawn(worker_args(id, r, world, "matrix", {"--counts", "0,1,7,4097,300007", "--timeout-ms", "60000"}));
  ASSERT_TRUE(p.wait_all(240s)) << "workers did not finish\n" << p.report();
  expect_all_exit_zero(p);
  print_counts(p);
}

INSTANTIATE_TEST_SUITE_P(Worlds, MatrixOddWorld, ::testing::Values(5, 6, 7),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

// Ranks arrive 0-3 s apart, in random order.
TEST(Join, StaggeredStartsInRandomOrder) {
  const int world = 4;
  const std::string id = new_id();
  std::mt19937 rng(std::random_device{}());
  std::vector<int> order = {0, 1, 2, 3};
  std::shuffle(order.begin(), order.end(), rng);
  Procs p;
  for (int r : order)
    p.spawn(worker_args(id, r, world, "matrix",
                        {"--delay-ms", std::to_string(rng() % 3000), "--counts", "0,7,4097", "--timeout-ms", "60000"}));
  ASSERT_TRUE(p.wait_all(120s)) << p.report();
  expect_all_exit_zero(p);
}

// Both all-reduce algorithms at every count, with a tiny workspace so that odd counts span
// several rounds and slices are empty or uneven (count 1 over 3 ranks).
class Algo : public ::testing::TestWithParam<std::string> {};

TEST_P(Algo, OddCountsWithATinyWorkspace) {
  const int world = 3;
  const std::string id = new_id();
  Procs p;
  for (int r = 0; r < world; ++r)
    p.spawn(worker_args(id, r, world, "matrix", {"--counts", "0,1,7,4097,70001", "--timeout-ms", "60000"}),
            {"ACTORCC_ALGO=" + GetParam(), "ACTORCC_WORKSPACE_BYTES=65536"});
  ASSERT_TRUE(p.wait_all(120s)) << p.report();
  expect_all_exit_zero(p);
}

INSTANTIATE_TEST_SUITE_P(CpuAllReduce, Algo, ::testing::Values("oneshot", "twoshot"));

// ---------------------------------------------------------------------------------------
// Point-to-point, all_to_all(_v), gather, scatter, reduce: every dtype, odd counts.

class P2P : public ::testing::TestWithParam<int> {};

TEST_P(P2P, EveryCallDtypeCount) {
  const int world = GetParam();
  const std::string id = new_id();
  Procs p;
  // 100003 elements span several channel chunks for every dtype at world 2 and 3.
  const std::string counts = world >= 8 ? "0,1,7,4097,30011" : "0,1,7,4097,100003";
  for (int r = 0; r < world; ++r)
    p.spawn(worker_args(id, r, world, "p2p", {"--counts", counts, "--timeout-ms", "60000"}));
  ASSERT_TRUE(p.wait_all(240s)) << "workers did not finish\n" << p.report();
  expect_all_exit_zero(p);
  print_counts(p);
}

INSTANTIATE_TEST_SUITE_P(Worlds, P2P, ::testing::Values(2, 3, 4, 8),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

// A tiny workspace makes 16 KiB chunks: every message but the smallest spans many chunks and
// both buffers of each channel alternate.
TEST(P2PChunks, TinyWorkspaceManyChunks) {
  const int world = 3;
  const std::string id = new_id();
  Procs p;
  for (int r = 0; r < world; ++r)
    p.spawn(worker_args(id, r, world, "p2p", {"--counts", "0,7,4097,70001", "--timeout-ms", "60000"}),
            {"ACTORCC_WORKSPACE_BYTES=65536"});
  ASSERT_TRUE(p.wait_all(180s)) << p.report();
  expect_all_exit_zero(p);
}

// Disagreeing point-to-point calls: every rank fails within the timeout (never hangs), and
// the error says what disagreed and names the ranks.
struct MismatchCase {
  const char* expect;
  int world;
  int receiver;               // the rank that detects it
  std::vector<std::string> needles;  // in the receiver's error
  const char* nodes = "";            // one ACTORCC_NODE_ID letter per rank ("": one host)
  std::string name() const { return std::string(expect) + (*nodes ? std::string("_nodes_") + nodes : ""); }
};

class P2PMismatch : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(P2PMismatch, EveryRankFailsNamingTheRanks) {
  const MismatchCase& mc = GetParam();
  const std::string id = new_id();
  Procs p;
  const auto t0 = Clock::now();
  for (int r = 0; r < mc.world; ++r)
    p.spawn(worker_args(id, r, mc.world, "p2p_mismatch", {"--expect", mc.expect, "--timeout-ms", "3000"}),
            *mc.nodes ? std::vector<std::string>{std::string("ACTORCC_NODE_ID=") + mc.nodes[r]} : std::vector<std::string>{});
  ASSERT_TRUE(p.wait_all(60s)) << p.report();
  EXPECT_LT(Clock::now() - t0, 30s) << p.report();
  expect_all_exit_zero(p);
  const std::string err = p[mc.receiver].err();
  for (const auto& n : mc.needles) EXPECT_NE(err.find(n), std::string::npos) << "missing '" << n << "'\n" << p.report();
  std::cout << p.report();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, P2PMismatch,
    ::testing::Values(MismatchCase{"count", 2, 1, {"mismatched", "rank 1 expects 50 float32", "rank 0 sent 100 float32"}},
                      MismatchCase{"dtype", 2, 1, {"mismatched", "100 int32", "rank 0 sent 100 float32"}},
                      MismatchCase{"peer", 3, 1, {"timed out", "waiting for rank(s)"}},
                      MismatchCase{"a2av", 3, 0, {"mismatched", "from rank 2", "rank 0 expects 4", "rank 2 sent 5"}},
                      // The same between virtual nodes: the message crosses TCP.
                      MismatchCase{"count", 2, 1, {"mismatched", "rank 1 expects 50 float32", "rank 0 sent 100 float32"}, "ab"},
                      MismatchCase{"dtype", 2, 1, {"mismatched", "100 int32", "rank 0 sent 100 float32"}, "ab"},
                      MismatchCase{"peer", 3, 1, {"timed out", "waiting for rank 2"}, "abc"},
                      MismatchCase{"a2av", 3, 0, {"mismatched", "from rank 2", "rank 0 expects 4", "rank 2 sent 5"}, "aab"}),
    [](const auto& info) { return info.param.name(); });

// Ranks on different hosts (virtual nodes, ACTORCC_NODE_ID): the CPU backend runs the
// hierarchical plans (shm in a node, TCP rails between), the whole matrix, with odd counts
// and a small workspace so chunks split blocks unevenly. Layouts: 2 x 2 placed alternately
// (rails {0,1}, {2,3}), 3 x 1 (rails only), and 2 + 1 (unequal: the node-leader fallback).
class VirtualNodes : public ::testing::TestWithParam<std::string> {};

TEST_P(VirtualNodes, EveryCollectiveDtypeOpCount) {
  const std::string nodes = GetParam();  // one letter per rank: its node
  const int world = static_cast<int>(nodes.size());
  const std::string id = new_id();
  Procs p;
  for (int r = 0; r < world; ++r)
    p.spawn(worker_args(id, r, world, "matrix", {"--counts", "0,1,7,4097,70001", "--timeout-ms", "60000"}),
            {std::string("ACTORCC_NODE_ID=") + nodes[r], "ACTORCC_WORKSPACE_BYTES=65536"});
  ASSERT_TRUE(p.wait_all(240s)) << "workers did not finish\n" << p.report();
  expect_all_exit_zero(p);
}

INSTANTIATE_TEST_SUITE_P(Layouts, VirtualNodes, ::testing::Values("abab", "abc", "aab"),
                         [](const auto& info) { return info.param; });

// Point-to-point and what is built on it, and reduce, across virtual nodes: messages inside a
// node over shm, between nodes over TCP, in one batch; every dtype, odd counts, every root
// (the cases cycle through them), poisoned outputs and guards (the p2p mode's checks).
TEST_P(VirtualNodes, PointToPointEveryCallDtypeCount) {
  const std::string nodes = GetParam();
  const int world = static_cast<int>(nodes.size());
  const std::string id = new_id();
  Procs p;
  for (int r = 0; r < world; ++r)
    p.spawn(worker_args(id, r, world, "p2p", {"--counts", "0,1,7,4097,70001", "--timeout-ms", "60000"}),
            {std::string("ACTORCC_NODE_ID=") + nodes[r], "ACTORCC_WORKSPACE_BYTES=65536"});
  ASSERT_TRUE(p.wait_all(240s)) << "workers did not finish\n" << p.report();
  expect_all_exit_zero(p);
}

// ---------------------------------------------------------------------------------------
// Failures.

// Rank 1 is SIGKILLed while everyone loops on all_reduce: the others must stop with a
// RemoteError naming rank 1 well within the timeout, and no segment may remain.
// Rank 1 is SIGKILLed while 4 ranks loop on all_reduce; `nodes` (one ACTORCC_NODE_ID per
// rank, "" for none) places them on virtual nodes.
// `mode`: the worker's loop (all_reduce, or all_to_all with "loop_a2a").
void expect_killed_rank_named(const std::string& nodes, const std::string& mode = "loop") {
  const int world = 4;
  const std::string id = new_id();
  Procs p;
  for (int r = 0; r < world; ++r)
    p.spawn(worker_args(id, r, world, mode, {"--culprit", "1", "--timeout-ms", "10000"}),
            nodes.empty() ? std::vector<std::string>{} : std::vector<std::string>{std::string("ACTORCC_NODE_ID=") + nodes[r]});
  ASSERT_TRUE(p.wait_for_output({0, 1, 2, 3}, "LOOPING", 60s)) << p.report();
  std::this_thread::sleep_for(200ms);
  const auto t0 = Clock::now();
  kill(p[1].pid, SIGKILL);
  ASSERT_TRUE(p.wait_all(30s)) << p.report();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int r : {0, 2, 3}) {
    EXPECT_TRUE(p[r].exited_with(0)) << p.report();
    EXPECT_NE(p[r].err().find("rank 1"), std::string::npos) << p.report();
  }
  EXPECT_LT(secs, 10.0) << "the others took " << secs << " s to notice";
  std::cout << p.report();  // the errors the ranks saw, for the log
  EXPECT_TRUE(p.leaked_segments().empty());
}

TEST(Failure, KilledRankIsNamedByTheOthers) { expect_killed_rank_named(""); }

// The same across virtual nodes a, b, a, b: rank 1 (node b) dies; its rail peer (rank 0 on
// node a), its node peer (rank 3) and rank 2 (neither) all name it.
TEST(Failure, KilledRankOnAnotherNodeIsNamedByAll) { expect_killed_rank_named("abab"); }
// The same in all_to_all: rank 1's messages to its node peer (shm) and to node a (TCP).
TEST(Failure, KilledRankInAllToAllAcrossNodesIsNamedByAll) { expect_killed_rank_named("abab", "loop_a2a"); }

// Rank 1 stops (SIGSTOP: alive, connected, silent): only the collective's own timeout can
// catch that. Every other rank must fail within about the timeout, naming rank 1, and with
// rank 1 as the error's culprit() (the worker checks both). `nodes` as above: on "aab" rank 1's
// node peer times out in shared memory and rank 2 (alone on its node) learns of it only through
// that rank's abort, which must carry rank 1 as the culprit, not the rank that aborted. (Rank 2
// waits for rank 0 meanwhile, so its own timeout is made longer: else it could time out first,
// rightly naming rank 0, the rank it waits for.)
void expect_stalled_rank_named(const std::string& nodes) {
  const int world = 3;
  const std::string id = new_id();
  Procs p;
  for (int r = 0; r < world; ++r)
    p.spawn(worker_args(id, r, world, "loop",
                        {"--culprit", "1", "--timeout-ms", !nodes.empty() && r == 2 ? "6000" : "2000"}),
            nodes.empty() ? std::vector<std::string>{} : std::vector<std::string>{std::string("ACTORCC_NODE_ID=") + nodes[r]});
  ASSERT_TRUE(p.wait_for_output({0, 1, 2}, "LOOPING", 60s)) << p.report();
  const auto t0 = Clock::now();
  kill(p[1].pid, SIGSTOP);
  const auto end = t0 + 20s;
  while (Clock::now() < end && !(p.wait_all(0ms), p[0].done() && p[2].done())) std::this_thread::sleep_for(20ms);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  kill(p[1].pid, SIGKILL);
  ASSERT_TRUE(p.wait_all(10s)) << p.report();
  for (int r : {0, 2}) EXPECT_TRUE(p[r].exited_with(0)) << p.report();
  EXPECT_LT(secs, 8.0) << "the others took " << secs << " s with a 2 s timeout";
  std::cout << p.report();  // the errors the ranks saw, for the log
  EXPECT_TRUE(p.leaked_segments().empty());
}

TEST(Failure, StalledRankTimesOutNamingIt) { expect_stalled_rank_named(""); }
TEST(Failure, StalledRankIsTheCulpritAcrossNodes) { expect_stalled_rank_named("aab"); }

// abort() on one rank makes the others raise RemoteError naming it.
TEST(Failure, AbortIsNamedByTheOthers) {
  const int world = 3;
  const std::string id = new_id();
  Procs p;
  for (int r = 0; r < world; ++r)
    p.spawn(worker_args(id, r, world, "abort", {"--culprit", "2", "--timeout-ms", "10000"}));
  ASSERT_TRUE(p.wait_all(60s)) << p.report();
  expect_all_exit_zero(p);
}

// A worker with a tampered token is rejected while the real group completes.
TEST(Join, WrongTokenIsRejected) {
  const int world = 2;
  const std::string id = new_id();
  std::string bad = id;
  // Bytes [28, 44) of the id hold the token (bootstrap/id_fields.hpp); flip one of them.
  bad[60] = bad[60] == '0' ? '1' : '0';
  Procs p;
  p.spawn(worker_args(bad, 1, world, "join_error", {"--timeout-ms", "20000"}));
  p.spawn(worker_args(id, 0, world, "hold", {"--hold-ms", "500"}));
  p.spawn(worker_args(id, 1, world, "hold", {"--hold-ms", "500"}));
  ASSERT_TRUE(p.wait_all(60s)) << p.report();
  expect_all_exit_zero(p);
  EXPECT_NE(p[0].err().find("token"), std::string::npos) << p.report();
}

// A second rank 0 joining a complete group (a second launch on the same id) is refused, and the
// group it tried to join is poisoned: every member's next call fails naming both claimants, so no
// rank can go on with a group another launch may have touched.
TEST(Join, DuplicateRankPoisonsTheGroup) {
  const int world = 2;
  const std::string id = new_id();
  Procs p;
  p.spawn(worker_args(id, 0, world, "hold", {"--hold-ms", "3000", "--expect", "poisoned"}));
  p.spawn(worker_args(id, 1, world, "hold", {"--hold-ms", "3000", "--expect", "poisoned"}));
  ASSERT_TRUE(p.wait_for_output({0, 1}, "JOINED", 30s)) << p.report();
  p.spawn(worker_args(id, 0, world, "join_error", {"--timeout-ms", "20000"}));
  ASSERT_TRUE(p.wait_all(60s)) << p.report();
  expect_all_exit_zero(p);
  for (int i : {0, 1, 2}) {
    EXPECT_NE(p[i].err().find("rank 0 is claimed twice"), std::string::npos) << p.report();
    for (int claimant : {0, 2})
      EXPECT_NE(p[i].err().find("pid " + std::to_string(p[claimant].pid)), std::string::npos) << p.report();
  }
}

// Bad arguments raise InvalidArgument before any data moves; a group of one stays usable (in a
// larger group the refusal aborts the group: BadCall below).
TEST(Arguments, BadInputsAreRejectedAndTheGroupStillWorks) {
  const int world = 1;
  const std::string id = new_id();
  Procs p;
  for (int r = 0; r < world; ++r) p.spawn(worker_args(id, r, world, "badargs", {"--timeout-ms", "20000"}));
  ASSERT_TRUE(p.wait_all(60s)) << p.report();
  expect_all_exit_zero(p);
}

// A bad argument on one rank of 4 while the others make the same call rightly: the others,
// whether already waiting in the call or entering it later, raise a RemoteError naming that rank
// and the reason within ~1 s (not the 20 s call timeout), and the group is aborted everywhere.
class BadCall : public ::testing::TestWithParam<std::string> {};

TEST_P(BadCall, EveryOtherRankNamesTheRefusedRankAtOnce) {
  const int world = 4, culprit = 2;
  const std::string id = new_id();
  Procs p;
  for (int r = 0; r < world; ++r)
    p.spawn(worker_args(id, r, world, "bad_call",
                        {"--culprit", std::to_string(culprit), "--bad", GetParam(), "--timeout-ms", "20000"}));
  ASSERT_TRUE(p.wait_for_output({culprit}, "FAULT", 60s)) << p.report();
  const auto t0 = Clock::now();
  ASSERT_TRUE(p.wait_all(30s)) << p.report();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  expect_all_exit_zero(p);
  // Rank 3 enters its call 0.3 s after the refusal; everyone then exits (a few ms each).
  EXPECT_LT(secs, 1.5) << p.report();
  std::cout << GetParam() << ": every rank done " << secs << " s after the refusal\n";
}

INSTANTIATE_TEST_SUITE_P(OneRank, BadCall,
                         ::testing::Values("null_send", "root", "op", "dtype", "misaligned", "a2av_counts"),
                         [](const auto& info) { return info.param; });

// Not a test: `--gtest_also_run_disabled_tests --gtest_filter=*Bench*` prints all_reduce
// latency and bandwidth of a world of ACTORCC_MP_BENCH_WORLD (default 4) ranks.
TEST(DISABLED_Bench, AllReduce) {
  const char* w = std::getenv("ACTORCC_MP_BENCH_WORLD");
  const int world = w ? std::atoi(w) : 4;
  const std::string id = new_id();
  Procs p;
  for (int r = 0; r < world; ++r) p.spawn(worker_args(id, r, world, "bench"));
  ASSERT_TRUE(p.wait_all(300s)) << p.report();
  std::cout << p[0].err();
  expect_all_exit_zero(p);
}

}  // namespace
