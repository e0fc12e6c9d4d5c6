// actorcc::Error builds the "rank R: " prefix itself, once: call sites pass the bare message.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "actorcc/error.hpp"
#include "common/abort_signal.hpp"

using namespace actorcc;

TEST(Error, PrefixesTheObservingRank) {
  EXPECT_STREQ(TimeoutError("barrier timed out", 3).what(), "actorcc timeout error: rank 3: barrier timed out");
  EXPECT_STREQ(InvalidArgument("null pointer", 0).what(), "actorcc invalid argument error: rank 0: null pointer");
  EXPECT_EQ(RemoteError("peer died", 5, 2).rank(), 2);
  EXPECT_STREQ(RemoteError("peer died", 5, 2).what(), "actorcc remote failure error: rank 2: peer died");
}

TEST(Error, MessageIsWhatWithoutItsOpening) {
  // What a refusal quotes in the group's abort: "... bad argument: rank 0: null pointer".
  EXPECT_EQ(InvalidArgument("null pointer", 0).message(), "rank 0: null pointer");
  EXPECT_EQ(RemoteError("peer died", 5, 2).message(), "rank 2: peer died");
  EXPECT_EQ(SystemError("socket: refused").message(), "socket: refused");
}

TEST(Error, NoPrefixWithoutARank) {
  EXPECT_STREQ(SystemError("socket: refused").what(), "actorcc system error: socket: refused");
  EXPECT_STREQ(Error(ErrorCode::Internal, "rank 4: x").what(), "actorcc internal error: rank 4: x");
}

TEST(Error, IdempotentForTheSameRank) {
  // A message that already opens with the same rank (rethrown, or the rank as the subject).
  EXPECT_STREQ(CudaError("rank 7: cudaMalloc: out of memory", 7).what(), "actorcc cuda error: rank 7: cudaMalloc: out of memory");
  EXPECT_STREQ(TimeoutError("rank 1 timed out after 5 ms", 1).what(), "actorcc timeout error: rank 1 timed out after 5 ms");
  EXPECT_STREQ(Error(ErrorCode::Internal, "rank 6", 6).what(), "actorcc internal error: rank 6");
  // Wrapping twice keeps one prefix.
  const std::string once = "rank 2: " + std::string("lost");
  EXPECT_STREQ(RemoteError(once, 1, 2).what(), "actorcc remote failure error: rank 2: lost");
}

TEST(Error, AnotherRankIsStillPrefixed) {
  // The text names a different rank (a culprit): the observer is named in front of it.
  EXPECT_STREQ(RemoteError("rank 0 closed the communicator", 0, 1).what(),
               "actorcc remote failure error: rank 1: rank 0 closed the communicator");
  // "rank 12" is not "rank 1", and "rank 1" is not "rank 12".
  EXPECT_STREQ(TimeoutError("rank 12: late", 1).what(), "actorcc timeout error: rank 1: rank 12: late");
  EXPECT_STREQ(TimeoutError("rank 1: late", 12).what(), "actorcc timeout error: rank 12: rank 1: late");
  EXPECT_STREQ(TimeoutError("rank 1x", 1).what(), "actorcc timeout error: rank 1: rank 1x");
}

namespace {

// What AbortSignal(self).rethrow() throws after raise(culprit, code, reason).
template <class E>
E rethrown(int self, int culprit, ErrorCode code, const std::string& reason) {
  AbortSignal a(self);
  a.raise(culprit, code, reason);
  try {
    a.rethrow();
  } catch (const E& e) {
    return e;
  }
  throw std::logic_error("rethrow did not throw the expected type");
}

}  // namespace

TEST(Error, AbortRethrowCarriesOnePrefix) {
  const auto own = rethrown<TimeoutError>(3, 3, ErrorCode::Timeout, "rank 3: all_reduce timed out");
  EXPECT_STREQ(own.what(), "actorcc timeout error: rank 3: all_reduce timed out");
  EXPECT_EQ(own.rank(), 3);
  const auto remote = rethrown<RemoteError>(1, 0, ErrorCode::Remote, "rank 0 aborted: bad input");
  EXPECT_STREQ(remote.what(), "actorcc remote failure error: rank 1: rank 0 aborted: bad input");
  EXPECT_EQ(remote.culprit(), 0);
  EXPECT_EQ(remote.rank(), 1);
}

// wait_until: the timed wait for an abort's cause (a kernel that obeyed an abort, a lost TCP
// connection) ends when the signal is raised, from another thread, not at a poll step; and at
// its deadline when nobody raises it.
TEST(AbortSignal, WaitUntilEndsWhenRaisedOrAtItsDeadline) {
  AbortSignal idle(0);
  const auto t0 = Clock::now();
  EXPECT_FALSE(idle.wait_until(Deadline::after(std::chrono::milliseconds(50))));
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(50));

  AbortSignal s(0);
  std::thread raiser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s.raise(2, ErrorCode::Remote, "rank 2 aborted");
  });
  const auto t1 = Clock::now();
  EXPECT_TRUE(s.wait_until(Deadline::after(std::chrono::milliseconds(10000))));
  EXPECT_LT(Clock::now() - t1, std::chrono::milliseconds(5000));
  raiser.join();
  EXPECT_EQ(s.culprit(), 2);
  EXPECT_TRUE(s.wait_until(Deadline::after(std::chrono::milliseconds(0))));  // already raised
}

// Ranks killed together reach the root one by one; every loss it reports is kept,
// not only the first, and every error lists them (culprits()).
// A listener registered again under its key replaces the earlier one (a shared segment made
// again on every resume), so a suspended and resumed communicator's list does not grow; unkeyed
// listeners all run.
TEST(AbortSignal, AKeyedListenerReplacesTheOneBeforeIt) {
  AbortSignal s(0);
  int key = 0, first = 0, second = 0, plain = 0;
  s.on_raise(&key, [&] { ++first; });
  s.on_raise(&key, [&] { ++second; });
  s.on_raise([&] { ++plain; });
  s.on_raise([&] { ++plain; });
  s.raise(1, ErrorCode::Remote, "x");
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
  EXPECT_EQ(plain, 2);
  s.on_raise(&key, [&] { ++second; });  // raised already: runs now
  EXPECT_EQ(second, 2);
}

TEST(Error, CulpritsHoldTheCulpritByDefault) {
  EXPECT_EQ(RemoteError("peer died", 5, 2).culprits(), std::vector<int>{5});
  EXPECT_TRUE(TimeoutError("root silent", 2).culprits().empty());
  RemoteError e("peer died", 5, 2);
  e.set_culprits({7, -1, 3, 7});
  EXPECT_EQ(e.culprits(), (std::vector<int>{3, 5, 7}));  // sorted, the culprit kept, -1 dropped
  EXPECT_EQ(e.culprit(), 5);
}

TEST(AbortSignal, EveryLossIsRecordedAndEveryLaterErrorListsThem) {
  AbortSignal s(0);
  s.raise_lost(3, "rank 3 disconnected");
  s.raise_lost(4, "rank 4 disconnected");  // after the first raise: news all the same
  s.raise_lost(3, "again");
  s.raise_lost(-1, "the root, hosted by no rank");
  EXPECT_EQ(s.lost(), (std::vector<int>{3, 4}));
  try {
    s.rethrow();
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.culprit(), 3);
    EXPECT_EQ(e.culprits(), (std::vector<int>{3, 4}));
    EXPECT_NE(std::string(e.what()).find("rank 3 disconnected"), std::string::npos);
  }
  // A plain raise (an abort, a timeout) is no loss.
  AbortSignal t(0);
  t.raise(2, ErrorCode::Timeout, "waited for rank 2");
  EXPECT_TRUE(t.lost().empty());
}

TEST(AbortSignal, LossWatchSeesEarlierAndLaterLossesAndNothingOnceGone) {
  AbortSignal s(0);
  s.raise_lost(1, "one");
  std::vector<int> seen;
  {
    AbortSignal::LossWatch w(s, [&](int r, const std::string&) { seen.push_back(r); });
    s.raise_lost(2, "two");
  }
  s.raise_lost(5, "five");
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
}
