// The Unix-domain sockets of the CUDA IPC exchange: abstract names carry no
// permissions, so both ends check the peer's user (SO_PEERCRED), and every wait is bounded.
// The cases with another user need root (a child process drops to uid 65534) and skip without.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "actorcc/error.hpp"
#include "transport/ipc/uds.hpp"

using namespace actorcc;
using namespace std::chrono;

namespace {

constexpr uid_t kStranger = 65534;  // "nobody"

std::string fresh_name() {
  return "actorcc-test-uds-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}());
}

// A child process running as kStranger: runs `fn` (plain system calls only: this process may
// have threads), then stays until killed. Returns its pid once `fn` has finished.
template <typename Fn>
pid_t stranger(Fn fn) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    if (::setgid(kStranger) != 0 || ::setuid(kStranger) != 0) ::_exit(2);
    fn();
    const char ok = 1;
    if (::write(ready[1], &ok, 1) != 1) ::_exit(3);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char ok = 0;
  const bool started = pid > 0 && ::read(ready[0], &ok, 1) == 1;
  ::close(ready[0]);
  if (!started && pid > 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

void end(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace

// Another user's connection is dropped by the accepting end, which keeps waiting: the real
// peer (this user) still gets in, and the stranger never gets a descriptor.
TEST(UdsSocket, AcceptDropsAnotherUsersConnectionAndKeepsWaiting) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a process as another user";
  const std::string name = fresh_name();
  UniqueFd listener = ipc::uds_listen(name);
  const pid_t pid = stranger([&] {
    // A plain connect (uds_connect would refuse the root-owned listener, rightly), held open
    // until the child is killed.
    const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, name.data(), name.size());  // abstract: a leading NUL
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())) != 0)
      ::_exit(4);
  });
  ASSERT_GT(pid, 0) << "could not start a process as uid " << kStranger;
  // Only the stranger is queued: accept must not return it.
  EXPECT_THROW(ipc::uds_accept(listener.get(), Deadline::after(milliseconds(300))), TimeoutError);
  std::thread peer([&] {
    UniqueFd c = ipc::uds_connect(name, Deadline::after(milliseconds(2000)));
    ipc::uds_send(c.get(), "hi", 2, -1);
  });
  UniqueFd got = ipc::uds_accept(listener.get(), Deadline::after(milliseconds(2000)));
  char buf[2] = {};
  ipc::uds_recv(got.get(), buf, 2, Deadline::after(milliseconds(2000)));
  peer.join();
  EXPECT_EQ(std::string(buf, 2), "hi");
  end(pid);
}

// A name another user holds (squatted before the group's rank could bind it) is refused by the
// connecting end, naming that user: no descriptor of GPU memory is sent to it.
TEST(UdsSocket, ConnectRefusesANameAnotherUserHolds) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a process as another user";
  const std::string name = fresh_name();
  const pid_t pid = stranger([&] { ipc::uds_listen(name).release(); });
  ASSERT_GT(pid, 0) << "could not start a process as uid " << kStranger;
  try {
    ipc::uds_connect(name, Deadline::after(milliseconds(1000)));
    ADD_FAILURE() << "connected to another user's socket";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("held by uid " + std::to_string(kStranger)), std::string::npos) << e.what();
  }
  end(pid);
}

// A connected peer that says nothing holds the exchange only as long as the deadline given
// (the IPC exchange gives a handshake kUdsHandshake, seconds, not the join deadline).
TEST(UdsSocket, SilentPeerTimesOutAtTheDeadlineGiven) {
  const std::string name = fresh_name();
  UniqueFd listener = ipc::uds_listen(name);
  UniqueFd silent = ipc::uds_connect(name, Deadline::after(milliseconds(2000)));
  UniqueFd got = ipc::uds_accept(listener.get(), Deadline::after(milliseconds(2000)));
  char buf[16];
  const auto t0 = steady_clock::now();
  EXPECT_THROW(ipc::uds_recv(got.get(), buf, sizeof buf, Deadline::after(milliseconds(300))), TimeoutError);
  const auto ms = duration_cast<milliseconds>(steady_clock::now() - t0).count();
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 2000);
  EXPECT_LE(ipc::kUdsHandshake, seconds(10));
}
