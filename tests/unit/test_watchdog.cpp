// Watchdog (common/watchdog.hpp): polls at its period until the poll reports what it watched
// for, and its owner's destruction stops it at once, whatever the period.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "common/watchdog.hpp"

using namespace actorcc;
using namespace std::chrono;

TEST(Watchdog, PollsUntilThePollFindsItThenStops) {
  std::atomic<int> polls{0};
  {
    Watchdog w(milliseconds(5), [&] { return ++polls == 3; });
    const auto t0 = steady_clock::now();
    while (polls < 3 && steady_clock::now() - t0 < seconds(5)) std::this_thread::sleep_for(milliseconds(1));
    std::this_thread::sleep_for(milliseconds(50));  // ten more periods: no poll after the find
  }
  EXPECT_EQ(polls.load(), 3);
}

TEST(Watchdog, DestructionStopsItWithoutWaitingForThePeriod) {
  std::atomic<int> polls{0};
  const auto t0 = steady_clock::now();
  {
    Watchdog w(seconds(3600), [&] { return ++polls > 0; });
  }
  EXPECT_LT(steady_clock::now() - t0, seconds(1));
  EXPECT_EQ(polls.load(), 0);
}
