// ShmSegment: RAII ownership of POSIX shared memory (create/open/unlink, nothing left behind).
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

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
    ShmSegment b = ShmSegment::open(name, 1 << 16);
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

// A segment that should exist (its creator announced it) but does not was removed by someone:
// opening it fails at once saying so, instead of waiting for a segment that never comes back.
TEST(ShmSegment, OpenFailsAtOnceWhenRemoved) {
  const std::string name = unique_name();
  ShmSegment a = ShmSegment::create(name, 4096);
  a.unlink();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    ShmSegment::open(name, 4096);
    FAIL() << "opened a removed segment";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("'" + name + "' was removed before this process opened it"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

// A child creates the segment named `name`, reports through a pipe, then dies: SIGKILLed, or
// (`zombie`) exiting, left unreaped. Returns its pid, dead and not reaped.
pid_t child_creates_and_dies(const std::string& name, bool zombie) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ShmSegment s = ShmSegment::create(name, 4096);
    (void)!::write(fds[1], "c", 1);
    if (zombie) ::_exit(0);  // no destructor: the name stays, as after a crash
    ::pause();               // killed by the parent
    ::_exit(1);
  }
  ::close(fds[1]);
  char c = 0;
  const bool created = ::read(fds[0], &c, 1) == 1;
  ::close(fds[0]);
  if (!created) return -1;
  if (!zombie) ::kill(pid, SIGKILL);
  siginfo_t info{};
  ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT);  // dead, not reaped
  return pid;
}

// A segment whose creator is dead (killed before anyone unlinked it) is
// removed by the next group's creator; one whose creator lives is left alone. Whether
// the creator lives is its lock, not its pid: the orphan's name here carries this (live)
// process's pid, as when the dead creator's pid was reused, and is removed all the same.
TEST(ShmSegment, OrphansOfDeadCreatorsAreRemoved) {
  const std::string tag = "actorcc-orphantest-" + std::to_string(::getpid()) + "-";
  const std::string orphan = "/" + tag + "x-p" + std::to_string(::getpid());
  const std::string alive = "/" + tag + "y-p" + std::to_string(::getpid());
  const pid_t dead = child_creates_and_dies(orphan, false);
  ASSERT_GT(dead, 0);
  ASSERT_TRUE(in_dev_shm(orphan));
  ShmSegment b = ShmSegment::create(alive, 4096);
  EXPECT_EQ(ShmSegment::remove_orphans(tag), 1);
  EXPECT_FALSE(in_dev_shm(orphan));
  EXPECT_TRUE(in_dev_shm(alive));
  EXPECT_EQ(ShmSegment::remove_orphans(tag), 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
}

// A creator that exited but is not yet reaped (a zombie: its parent, a launcher, polls) is dead
// too. The elastic shrink after a death inside a shrink depends on it: the next creator sweeps
// the dead one's segment while the launcher has not yet waited on it.
TEST(ShmSegment, OrphansOfZombieCreatorsAreRemoved) {
  const std::string tag = "actorcc-zombietest-" + std::to_string(::getpid()) + "-";
  const std::string orphan = "/" + tag + "x-p1";
  const pid_t zombie = child_creates_and_dies(orphan, true);
  ASSERT_GT(zombie, 0);
  ASSERT_TRUE(in_dev_shm(orphan));
  EXPECT_EQ(ShmSegment::remove_orphans(tag), 1);
  EXPECT_FALSE(in_dev_shm(orphan));
  ASSERT_EQ(::waitpid(zombie, nullptr, 0), zombie);
}

// A sweep from another pid namespace (a container sharing /dev/shm), where this
// creator's pid does not exist, leaves its segment alone while it lives.
TEST(ShmSegment, SweepFromAnotherPidNamespaceSparesALiveCreator) {
  const std::string tag = "actorcc-pidnstest-" + std::to_string(::getpid()) + "-";
  const std::string name = "/" + tag + "x-p" + std::to_string(::getpid());
  ShmSegment a = ShmSegment::create(name, 4096);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The first child enters a new pid namespace; its own child is that namespace's pid 1.
    if (::unshare(CLONE_NEWPID) != 0) ::_exit(100);
    const pid_t inner = ::fork();
    if (inner == 0) {
      const int removed = ShmSegment::remove_orphans(tag);
      ::_exit(::getpid() == 1 ? removed : 101);
    }
    int status = 0;
    ::waitpid(inner, &status, 0);
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 102);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 100) GTEST_SKIP() << "unshare(CLONE_NEWPID) is not permitted here (needs root)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "segments removed by the sweep in the other namespace (101: not pid 1 there)";
  EXPECT_TRUE(in_dev_shm(name));
}

// The creator locks its new file only after shm_open made the name, so a sweep can find it
// unlocked for an instant and remove it; the creator then makes it again. Whatever the
// interleaving, create() returns a segment that is in /dev/shm and locked, and sweeps running
// alongside never remove a segment whose creator holds it.
TEST(ShmSegment, CreateRacingSweepsAlwaysKeepsItsSegment) {
  const std::string tag = "actorcc-racetest-" + std::to_string(::getpid()) + "-";
  std::atomic<bool> stop{false};
  std::thread sweeper([&] {
    while (!stop.load()) ShmSegment::remove_orphans(tag);
  });
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  int made = 0;
  for (; std::chrono::steady_clock::now() < end; ++made) {
    const std::string name = "/" + tag + std::to_string(made) + "-p" + std::to_string(::getpid());
    ShmSegment s = ShmSegment::create(name, 4096);
    ASSERT_TRUE(in_dev_shm(name)) << "attempt " << made;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    ASSERT_TRUE(in_dev_shm(name)) << "swept while its creator holds it, attempt " << made;
  }
  stop = true;
  sweeper.join();
  EXPECT_GT(made, 10);
}

}  // namespace
}  // namespace actorcc
