// The launcher's worker processes: each started by re-executing this binary with --worker, in
// its own process group and with PR_SET_PDEATHSIG (it dies with the launcher), reaped without
// blocking, and killed (SIGTERM, then SIGKILL after 3 s) on every exit path.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "launcher.hpp"

extern char** environ;

namespace actorcc::bench {

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

void handle_stop_signals(void (*handler)(int)) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

std::string describe_exit(const WorkerProc& w) {
  if (!w.exited) return "still running";
  if (WIFEXITED(w.status)) {
    int rc = WEXITSTATUS(w.status);
    switch (rc) {
      case kExitOk: return "finished";
      case kExitRemote: return "exit 4: stopped because another rank failed";
      case kExitTimeout: return "exit 5: a bounded wait timed out";
      default: return "exit code " + std::to_string(rc);
    }
  }
  if (WIFSIGNALED(w.status)) {
    int sig = WTERMSIG(w.status);
    return std::string(w.killed_by_us ? "killed by the launcher (" : "killed by signal ") + strsignal(sig) +
           (w.killed_by_us ? ")" : "");
  }
  return "ended";
}

bool primary_failure(const WorkerProc& w) {
  if (!w.exited || w.killed_by_us) return false;
  if (WIFSIGNALED(w.status)) return true;
  int rc = WEXITSTATUS(w.status);
  return rc != kExitOk && rc != kExitRemote && rc != kExitTimeout;
}

void Launcher::spawn(WorkerProc& w) {
  Config wc = c_;
  wc.run_dir = run_dir_;
  std::vector<std::string> args = {exe_};
  for (auto& a : to_worker_args(wc, w.rank, world_, w.device)) args.push_back(a);
  // Environment: ours, with the worker's settings replacing any inherited value.
  std::vector<std::string> env;
  std::vector<std::string> over = w.env;
  over.push_back(std::string(kIdEnv) + "=" + id_hex_);
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (auto& o : over)
      if (o.compare(0, key.size() + 1, key + "=") == 0) replaced = true;
    if (!replaced) env.push_back(kv);
  }
  env.insert(env.end(), over.begin(), over.end());
  std::vector<char*> argp, envp;
  for (auto& s : args) argp.push_back(const_cast<char*>(s.c_str()));
  argp.push_back(nullptr);
  for (auto& s : env) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);

  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec (the launcher has threads).
    setpgid(0, 0);                     // own group: a terminal's Ctrl-C reaches only the launcher
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // die with the launcher, even if it is SIGKILLed
    if (getppid() != parent) _exit(126);
    handle_stop_signals(SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(argp[0], argp.data(), envp.data());
    const char msg[] = "actorcc-bench: exec of the worker failed\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so the group exists before we might signal it
  w.pid = pid;
  w.started = true;
  w.status_text = "started";
  last_progress_ = Clock::now();
}

void Launcher::reap() {
  for (;;) {
    int st = 0;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid <= 0) return;
    for (auto& w : workers_)
      if (w.pid == pid && !w.exited) {
        w.exited = true;
        w.status = st;
        w.exited_at = Clock::now();
      }
  }
}

void Launcher::kill_all() {
  bool any = false;
  for (auto& w : workers_)
    if (w.started && !w.exited) {
      kill(-w.pid, SIGTERM);
      kill(w.pid, SIGTERM);
      w.killed_by_us = true;
      any = true;
    }
  if (!any) return;
  auto t0 = Clock::now();
  while (secs_since(t0) < 3) {
    reap();
    bool alive = false;
    for (auto& w : workers_) alive |= w.started && !w.exited;
    if (!alive) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& w : workers_)
    if (w.started && !w.exited) {
      kill(-w.pid, SIGKILL);
      kill(w.pid, SIGKILL);
    }
  for (auto& w : workers_)
    if (w.started && !w.exited) {
      int st = 0;
      while (waitpid(w.pid, &st, 0) < 0 && errno == EINTR) {
      }
      w.exited = true;
      w.status = st;
    }
  // Grandchildren that left the worker's group are not ours; every worker's group gets a last
  // SIGKILL in case one outlived its leader.
  for (auto& w : workers_)
    if (w.started) kill(-w.pid, SIGKILL);
}

}  // namespace actorcc::bench
