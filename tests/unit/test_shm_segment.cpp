// ShmSegment: RAII ownership of POSIX shared memory (create/open/unlink, nothing left behind).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "actorcc/error.hpp"
#include "transport/shm/shm_segment.hpp"

namespace actorcc {
namespace {

std::string unique_name() { return "/actorcc-unittest-" + std::to_string(::getpid()) + "-" + std::to_string(rand()); }
bool in_dev_shm(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

TEST(ShmSegment, CreateOpenShareAndUnlink) {
  const std::string name = unique_name();
  {
    ShmSegment a = ShmSegment::create(name, 1 << 16);
    EXPECT_TRUE(in_dev_shm(name));
    EXPECT_EQ(static_cast<unsigned char*>(a.data())[100], 0);  // zero-filled
    ShmSegment b = ShmSegment::open(name, 1 << 16, Deadline::after(std::chrono::seconds(1)));
    std::memcpy(a.data(), "hello", 6);
    EXPECT_STREQ(static_cast<const char*>(b.data()), "hello");  // same memory
    a.unlink();
    EXPECT_FALSE(in_dev_shm(name));
    std::memcpy(b.data(), "still", 6);  // mappings outlive the name
    EXPECT_STREQ(static_cast<const char*>(a.data()), "still");
  }
  EXPECT_FALSE(in_dev_shm(name));
}

TEST(ShmSegment, DestructorUnlinksWhatItCreated) {
  const std::string name = unique_name();
  {
    ShmSegment a = ShmSegment::create(name, 4096);
    ShmSegment moved = std::move(a);  // ownership moves with the object
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_TRUE(in_dev_shm(name));
  }
  EXPECT_FALSE(in_dev_shm(name));
}

TEST(ShmSegment, CreateIsExclusive) {
  const std::string name = unique_name();
  ShmSegment a = ShmSegment::create(name, 4096);
  EXPECT_THROW(ShmSegment::create(name, 4096), SystemError);
  EXPECT_TRUE(in_dev_shm(name));  // the failed create must not remove the owner's segment
}

TEST(ShmSegment, OpenTimesOutWhenMissing) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(ShmSegment::open(unique_name(), 4096, Deadline::after(std::chrono::milliseconds(50))), TimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

// Issue 21, item 13: a segment whose creator is dead (killed before anyone unlinked it) is
// removed by the next group's creator; one whose creator lives is left alone.
TEST(ShmSegment, OrphansOfDeadCreatorsAreRemoved) {
  pid_t dead = ::fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const std::string tag = "actorcc-orphantest-" + std::to_string(::getpid()) + "-";
  const std::string orphan = "/" + tag + "x-p" + std::to_string(dead);
  const std::string alive = "/" + tag + "y-p" + std::to_string(::getpid());
  ShmSegment a = ShmSegment::create(orphan, 4096);
  ShmSegment b = ShmSegment::create(alive, 4096);
  // (a's own unlink at scope end finds nothing left: harmless, as after a real orphan sweep.)
  EXPECT_EQ(ShmSegment::remove_orphans(tag), 1);
  EXPECT_FALSE(in_dev_shm(orphan));
  EXPECT_TRUE(in_dev_shm(alive));
  EXPECT_EQ(ShmSegment::remove_orphans(tag), 0);
}

// A creator that was killed but not yet reaped (a zombie: its parent, a launcher, polls) is dead
// too. The elastic shrink after a death inside a shrink depends on it: the next creator sweeps
// the dead one's segment while the launcher has not yet waited on it.
TEST(ShmSegment, OrphansOfZombieCreatorsAreRemoved) {
  pid_t zombie = ::fork();
  ASSERT_GE(zombie, 0);
  if (zombie == 0) ::_exit(0);
  // Not reaped: wait until the child has exited, leaving it a zombie.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT), 0);
  const std::string tag = "actorcc-zombietest-" + std::to_string(::getpid()) + "-";
  const std::string orphan = "/" + tag + "x-p" + std::to_string(zombie);
  ShmSegment a = ShmSegment::create(orphan, 4096);
  EXPECT_EQ(ShmSegment::remove_orphans(tag), 1);
  EXPECT_FALSE(in_dev_shm(orphan));
  ASSERT_EQ(::waitpid(zombie, nullptr, 0), zombie);
}

}  // namespace
}  // namespace actorcc
