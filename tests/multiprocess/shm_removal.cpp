// The shared-memory segment of a forming group meets another process: rank
// --culprit, a non-creator, is about to map the segment its creator announced when
//   removed      the segment is removed (what a foreign cleanup does): every rank must fail at
//                once, saying so, not at the join timeout;
//   pidns_sweep  a group of one in another pid namespace (unshare, as docker --ipc=host gives)
//                forms, sweeping /dev/shm for orphans: the segment's creator is alive, so the
//                segment must survive and the group form with exact results.
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "faults.hpp"

extern char** environ;

namespace mpw {
namespace {

// Runs `argv` and waits for it, killing it after `limit`; its exit code, or -1.
int run_child(std::vector<std::string> args, std::chrono::seconds limit) {
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  const auto end = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

int sweep_group_run(const Args& a) {
  Communicator c(UniqueId::create("127.0.0.1"), 0, 1, options_for(a));
  small_all_reduce_check(c);
  std::cerr << "sweeper (pid " << ::getpid() << " in its namespace) formed its group" << std::endl;
  return 0;
}

int shm_removal_run(const Args& a) {
  const std::string tag = "rank " + std::to_string(a.rank);
  int sweeper_rc = 0;
  if (a.rank == a.culprit) {
    if (a.phase == "removed")
      arm_before_shm_open([tag](const char* name) {
        std::cerr << tag << " removes " << name << " before mapping it" << std::endl;
        ::shm_unlink(name);
      });
    else
      arm_before_shm_open([&, tag](const char*) {
        sweeper_rc = run_child({"unshare", "--pid", "--fork", "--mount-proc", self_path(), "--mode", "sweep_group",
                                "--timeout-ms", "10000"},
                               std::chrono::seconds(30));
        std::cerr << tag << ": the sweeper in another pid namespace exited with " << sweeper_rc << std::endl;
      });
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    auto c = make_comm(a);
    std::cout << "JOINED" << std::endl;
    for (size_t n : {size_t{1}, size_t{4097}, size_t{1} << 18}) {
      std::vector<int32_t> v(n, a.rank + 1);
      c->all_reduce(v.data(), v.data(), n, DataType::Int32, RedOp::Sum);
      for (int32_t x : v)
        if (x != a.world * (a.world + 1) / 2) throw Failure(tag + ": wrong all_reduce result");
    }
    if (a.phase == "removed") {
      std::cerr << tag << " formed its group although its segment was removed" << std::endl;
      return 3;
    }
    if (sweeper_rc != 0) {
      std::cerr << tag << ": the sweeper's own group failed" << std::endl;
      return 3;
    }
    std::cerr << tag << " formed its group and all_reduce is exact" << std::endl;
    return 0;
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << tag << " got " << to_string(e.code()) << " after " << s << " s: " << e.what() << std::endl;
    const std::string want = "was removed before this process opened it";
    return a.phase == "removed" && std::string(e.what()).find(want) != std::string::npos &&
                   names_rank(e.what(), a.culprit)
               ? 0
               : 3;
  }
}

}  // namespace mpw
