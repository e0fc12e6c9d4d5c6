// The settle step's rounds (worker.cpp, Worker::settle): untimed calls of the first size
// before the sweep, so the GPU's clocks have ramped up (bench/results/2026-11-30-h200x2-{k,l,m}).
// It stops at kSettleCalls calls or after about kSettleMs, whichever comes first: on dedicated
// GPUs 2000 calls take ~20 ms, but ranks sharing one GPU take ~10 ms per hierarchical call, and
// 2000 of them would outlast the launcher's no-progress rule. Every rank must make the same
// calls, so each round's size follows only from what all ranks agreed on: the calls made so far
// and the largest elapsed time over the ranks.
#pragma once
#include <algorithm>

namespace actorcc::bench {

constexpr int kSettleCalls = 2000;
constexpr double kSettleMs = 1000;
constexpr int kSettleFirstRound = 20;
constexpr int kSettleGrowth = 4;  // each round at most this many times the calls so far

// The next round's calls after `done` calls took `elapsed_ms` (max over ranks); 0: stop.
inline int settle_next_round(int done, double elapsed_ms) {
  if (done >= kSettleCalls || elapsed_ms >= kSettleMs) return 0;
  const int left = kSettleCalls - done;
  if (done == 0) return std::min(left, kSettleFirstRound);
  // As many as fit in the time left at the pace so far (a round that ran over ends the step).
  const double per_call = elapsed_ms / done;
  const double fit = per_call > 0 ? (kSettleMs - elapsed_ms) / per_call : static_cast<double>(left);
  const int n = static_cast<int>(std::min<double>({static_cast<double>(left), static_cast<double>(done) * kSettleGrowth, fit}));
  return std::max(n, 0);
}

}  // namespace actorcc::bench
