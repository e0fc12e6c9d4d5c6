// Verdict: every rank's attempt at a setup step, gathered so that every rank raises the same
// error, listing every rank that failed, naming the first (or the rank its error blames) and
// carrying that error's code.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bootstrap/verdict.hpp"
#include "bootstrap_harness.hpp"

using namespace bootstrap_test;

TEST(Verdict, AttemptOfKeepsAnErrorsCodeAndCulprit) {
  const Attempt a = attempt_of(SystemError("no space in /dev/shm", 2));
  EXPECT_EQ(a.code, ErrorCode::System);
  EXPECT_EQ(a.culprit, -1);
  EXPECT_TRUE(contains(a.error, "no space in /dev/shm")) << a.error;
  const Attempt r = attempt_of(RemoteError("peer gone", 4, 1));
  EXPECT_EQ(r.code, ErrorCode::Remote);
  EXPECT_EQ(r.culprit, 4);
  const Attempt other = attempt_of(std::runtime_error("plain"));
  EXPECT_EQ(other.code, ErrorCode::Internal);
  EXPECT_EQ(other.culprit, -1);
  EXPECT_EQ(other.error, "plain");
}

TEST(Verdict, TryMakeReturnsTheAttemptAndEmptiesTheOutputOnFailure) {
  UniqueId id = UniqueId::create("127.0.0.1");
  auto b = join(id, 0, 1);
  std::unique_ptr<int> out;
  EXPECT_TRUE(try_make(*b, out, [] { return std::make_unique<int>(7); }).error.empty());
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, 7);
  const Attempt a = try_make(*b, out, []() -> std::unique_ptr<int> { throw UnsupportedError("no such thing", 0); });
  EXPECT_FALSE(out);
  EXPECT_EQ(a.code, ErrorCode::Unsupported);
  EXPECT_TRUE(contains(a.error, "no such thing")) << a.error;
}

TEST(Verdict, EveryRankNamesTheFailingRanks) {
  UniqueId id = UniqueId::create("127.0.0.1");
  const int world = 4;
  std::vector<std::string> texts(world), raised(world);
  std::vector<int> culprits(world, -2);
  std::vector<ErrorCode> codes(world, ErrorCode::Internal);
  auto errs = run_ranks(world, [&](int r) {
    auto b = join(id, r, world);
    // Round 1: all ok.
    EXPECT_TRUE(failed_ranks(*b, in(milliseconds(5000)), {}).ok());
    // Round 2: ranks 1 and 3 fail; rank 1 (the first) with a System error, so that is the code.
    Attempt mine;
    if (r == 1) mine = attempt_of(SystemError("disk full", 1));
    if (r == 3) mine = attempt_of(std::runtime_error("broken"));
    const Verdict v = failed_ranks(*b, in(milliseconds(5000)), mine);
    EXPECT_FALSE(v.ok());
    texts[r] = v.text;
    culprits[r] = v.culprit;
    codes[r] = v.code;
    try {
      v.raise("setup failed on ", r);
    } catch (const Error& e) {
      raised[r] = e.what();
      EXPECT_EQ(e.rank(), r);
      EXPECT_EQ(e.culprit(), 1);
    }
    // Round 3: the failing rank's error blames another rank: that rank is the culprit.
    const Attempt blames = r == 2 ? attempt_of(RemoteError("rank 0 went away", 0, 2)) : Attempt{};
    EXPECT_EQ(failed_ranks(*b, in(milliseconds(5000)), blames).culprit, 0);
  });
  expect_ok(errs);
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(texts[r], texts[0]);
    EXPECT_EQ(culprits[r], 1);
    EXPECT_EQ(codes[r], ErrorCode::System);
    EXPECT_TRUE(contains(raised[r], "setup failed on \n  rank 1: ")) << raised[r];
  }
  EXPECT_TRUE(contains(texts[0], "\n  rank 1: ")) << texts[0];
  EXPECT_TRUE(contains(texts[0], "disk full\n  rank 3: broken")) << texts[0];
  EXPECT_FALSE(contains(texts[0], "rank 0:")) << texts[0];
  EXPECT_FALSE(contains(texts[0], "rank 2:")) << texts[0];
}
