// Helpers of the multiprocess suites: spawning mp_worker ranks with their own arguments,
// waiting for them with a timeout, killing leftovers, and finding leaked /dev/shm segments.
#pragma once
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actorcc/actorcc.hpp"

#ifndef ACTORCC_MP_WORKER
#error "ACTORCC_MP_WORKER (path of mp_worker) must be defined by the build"
#endif

extern char** environ;

namespace mp {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A temporary directory for the workers' stdout/stderr, removed afterwards.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/actorcc-mp-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    if (DIR* d = opendir(path.c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') unlink((path + "/" + e->d_name).c_str());
      closedir(d);
    }
    rmdir(path.c_str());
  }
};

struct Worker {
  pid_t pid = -1;
  int status = -1;  // waitpid status, -1 while running
  std::string out_path, err_path;
  bool done() const { return status != -1; }
  bool exited_with(int code) const { return done() && WIFEXITED(status) && WEXITSTATUS(status) == code; }
  std::string describe() const {
    if (!done()) return "still running";
    if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
    return "status " + std::to_string(status);
  }
  std::string out() const { return read_file(out_path); }
  std::string err() const { return read_file(err_path); }
};

// The group's processes. The destructor SIGKILLs and reaps anything still running, so a
// failing test never leaves workers behind.
class Procs {
 public:
  ~Procs() {
    for (auto& w : workers_)
      if (!w.done()) {
        kill(w.pid, SIGKILL);
        waitpid(w.pid, &w.status, 0);
      }
  }

  // `env` entries ("NAME=value") are added to this process's environment for the worker.
  Worker& spawn(std::vector<std::string> args, std::vector<std::string> env = {}) {
    Worker w;
    const std::string stem = dir_.path + "/w" + std::to_string(workers_.size());
    w.out_path = stem + ".out";
    w.err_path = stem + ".err";
    args.insert(args.begin(), ACTORCC_MP_WORKER);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (char** e = environ; *e; ++e) env.push_back(*e);  // earlier entries win in getenv
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, w.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, w.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawn(&w.pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0) << "posix_spawn " << argv[0];
    workers_.push_back(w);
    return workers_.back();
  }

  // Reaps workers until all are done or `timeout` passes; returns false on timeout.
  bool wait_all(std::chrono::milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    for (;;) {
      bool all = true;
      for (auto& w : workers_) {
        if (w.done()) continue;
        if (waitpid(w.pid, &w.status, WNOHANG) == 0) {
          w.status = -1;
          all = false;
        }
      }
      if (all) return true;
      if (Clock::now() > end) return false;
      std::this_thread::sleep_for(20ms);
    }
  }

  // Waits until `text` appears in the stdout of every worker in `which`.
  bool wait_for_output(const std::vector<size_t>& which, const std::string& text, std::chrono::milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      bool all = true;
      for (size_t i : which) all = all && workers_[i].out().find(text) != std::string::npos;
      if (all) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  std::vector<Worker>& workers() { return workers_; }
  Worker& operator[](size_t i) { return workers_[i]; }

  std::string report() const {
    std::ostringstream os;
    for (size_t i = 0; i < workers_.size(); ++i)
      os << "--- worker " << i << " (pid " << workers_[i].pid << ", " << workers_[i].describe() << ")\n"
         << workers_[i].err();
    return os.str();
  }

  // Shared-memory segments of these workers still in /dev/shm (segment names end in
  // "-p<creator pid>"; a leak there would outlive the processes).
  std::vector<std::string> leaked_segments() const {
    std::vector<std::string> found;
    if (DIR* d = opendir("/dev/shm")) {
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.rfind("actorcc-", 0) != 0) continue;
        for (const auto& w : workers_)
          if (name.size() > 0 && name.ends_with("-p" + std::to_string(w.pid))) found.push_back(name);
      }
      closedir(d);
    }
    return found;
  }

 private:
  TempDir dir_;
  std::vector<Worker> workers_;
};

inline std::vector<std::string> worker_args(const std::string& id, int rank, int world, const std::string& mode,
                                     std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"--id", id, "--rank", std::to_string(rank), "--world", std::to_string(world), "--mode",
                                mode};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// A loopback port free right now (for groups formed with from_address).
inline uint16_t free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

inline std::string new_id() { return actorcc::UniqueId::create("127.0.0.1").to_string(); }

inline void expect_all_exit_zero(Procs& p) {
  for (size_t i = 0; i < p.workers().size(); ++i) EXPECT_TRUE(p[i].exited_with(0)) << p.report();
  EXPECT_TRUE(p.leaked_segments().empty()) << "leaked shm: " << p.leaked_segments().front();
}

}  // namespace mp
