// The settle step's rounds (settle.hpp): how many calls each round makes at a given pace, so
// that dedicated GPUs still make all 2000 calls and shared ones stop after about a second.
#include <gtest/gtest.h>

#include "settle.hpp"

namespace actorcc::bench {
namespace {

struct Rounds {
  int calls = 0, rounds = 0;
  double ms = 0;
};

// The rounds at `ms_per_call`, each round also paying `round_ms` (the sync and the agreement).
Rounds simulate(double ms_per_call, double round_ms = 0) {
  Rounds r;
  for (int n; (n = settle_next_round(r.calls, r.ms)) > 0;) {
    EXPECT_GT(n, 0);
    r.calls += n;
    r.ms += n * ms_per_call + round_ms;
    ++r.rounds;
    EXPECT_LT(r.rounds, 100) << "the rounds never end";
    if (r.rounds >= 100) break;
  }
  return r;
}

TEST(Settle, DedicatedGpusMakeAllCallsInFewRounds) {
  const Rounds r = simulate(0.010, 0.2);  // 10 us a call, 0.2 ms a round
  EXPECT_EQ(r.calls, kSettleCalls);
  EXPECT_LE(r.rounds, 6);
  EXPECT_LT(r.ms, 25);
}

TEST(Settle, SharedGpuStopsNearTheTimeBound) {
  const Rounds r = simulate(10.0, 1.0);  // 10 ms a call: 2000 calls would take 20 s
  EXPECT_LT(r.calls, kSettleCalls);
  EXPECT_GE(r.calls, 50);
  EXPECT_LE(r.ms, kSettleMs * 1.1);
  EXPECT_GE(r.ms, kSettleMs * 0.8);
}

TEST(Settle, SlowCallsStopAfterTheFirstRound) {
  const Rounds r = simulate(200.0);  // the first round alone runs past the bound
  EXPECT_EQ(r.rounds, 1);
  EXPECT_EQ(r.calls, kSettleFirstRound);
}

TEST(Settle, EveryPaceEndsWithinCountAndTime) {
  for (double ms : {0.0, 0.001, 0.05, 0.5, 2.0, 7.0, 30.0}) {
    const Rounds r = simulate(ms);
    EXPECT_LE(r.calls, kSettleCalls) << ms;
    // Past the first round no round starts that would run past the bound at the pace so far.
    if (r.rounds > 1) EXPECT_LE(r.ms, kSettleMs + 1e-6) << ms;
  }
}

TEST(Settle, SameInputsSameRound) {
  // The ranks agree on (calls, max elapsed): the next round depends on nothing else.
  EXPECT_EQ(settle_next_round(0, 0), kSettleFirstRound);
  EXPECT_EQ(settle_next_round(20, 0.2), 80);
  EXPECT_EQ(settle_next_round(20, 200), 80);
  EXPECT_EQ(settle_next_round(100, 950), 5);
  EXPECT_EQ(settle_next_round(100, 1000), 0);
  EXPECT_EQ(settle_next_round(kSettleCalls, 1), 0);
  EXPECT_EQ(settle_next_round(1900, 10), 100);
}

}  // namespace
}  // namespace actorcc::bench
