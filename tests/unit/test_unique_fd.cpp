// UniqueFd, the one fd owner: closes exactly once, moves ownership, gives it up on release().
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <utility>

#include "common/unique_fd.hpp"

using actorcc::UniqueFd;

namespace {
bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }
}  // namespace

TEST(UniqueFd, ClosesOnDestructionAndReset) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  {
    UniqueFd r(p[0]);
    UniqueFd w(p[1]);
    EXPECT_TRUE(r.valid());
    EXPECT_TRUE(static_cast<bool>(w));
    w.reset();
    EXPECT_FALSE(is_open(p[1]));
    EXPECT_FALSE(w.valid());
    EXPECT_TRUE(is_open(p[0]));
  }
  EXPECT_FALSE(is_open(p[0]));
}

TEST(UniqueFd, MoveTransfersOwnership) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd a(p[0]), b(p[1]);
  UniqueFd c(std::move(a));
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(c.get(), p[0]);
  c = std::move(b);  // closes p[0], takes p[1]
  EXPECT_FALSE(is_open(p[0]));
  EXPECT_EQ(c.get(), p[1]);
  EXPECT_FALSE(b.valid());
  EXPECT_TRUE(is_open(p[1]));
}

TEST(UniqueFd, ReleaseGivesUpAndResetToSameFdKeepsIt) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  int raw;
  {
    UniqueFd r(p[0]);
    raw = r.release();
    EXPECT_FALSE(r.valid());
  }
  EXPECT_TRUE(is_open(raw));
  UniqueFd w(p[1]);
  w.reset(p[1]);  // taking the descriptor it holds must not close it
  EXPECT_TRUE(is_open(p[1]));
  w.reset(raw);  // closes p[1], owns p[0]
  EXPECT_FALSE(is_open(p[1]));
  EXPECT_TRUE(is_open(raw));
}
