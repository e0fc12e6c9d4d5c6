// The launcher: what a user runs. It resolves the configuration, creates the group's UniqueId
// (starting the bootstrap root in this process, as a Ray driver would), starts one worker per
// rank by re-executing this binary with --worker (actors: one GPU visible each, started one by
// one; torchrun: all GPUs visible, started together), prints results as rank 0 reports them,
// and turns any worker failure, hang or wrong result into a non-zero exit that names the rank
// and the message size. Workers live in their own process groups and die with the launcher
// (PR_SET_PDEATHSIG); every exit path kills what is left of them.
//
// This header is the launcher's own (one class, its member functions in launcher*.cpp by
// concern): launcher.cpp supervises the run, launcher_setup.cpp resolves the configuration
// into ranks, GPUs and environments, launcher_procs.cpp starts, reaps and kills the worker
// processes, launcher_results.cpp reads their reports and judges the run.
#pragma once
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench.hpp"
#include "gpu.hpp"
#include "report.hpp"

namespace actorcc::bench {

// The stop signal that arrived (0: none); set by on_signal.
extern volatile sig_atomic_t g_signal;
void on_signal(int sig);
// Sets the handler of the signals that stop a run (Ctrl-C, kill, a closed terminal).
// Async-signal-safe: the child calls it between fork and exec.
void handle_stop_signals(void (*handler)(int));

using Clock = std::chrono::steady_clock;
inline double secs_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct WorkerProc {
  int rank = -1;
  int gpu = -1;     // launcher's GPU index, -1 on the CPU backend
  int device = -1;  // ordinal inside the worker
  pid_t pid = -1;
  bool started = false;
  bool exited = false;
  int status = 0;   // waitpid status
  Clock::time_point exited_at{};
  bool killed_by_us = false;
  std::string status_text = "not started";
  uint64_t status_seq = 0;
  std::vector<std::string> env;
};

std::string describe_exit(const WorkerProc& w);
// A failure the rank itself caused (as opposed to noticing another rank's failure).
bool primary_failure(const WorkerProc& w);

class Launcher {
 public:
  Launcher(Config c, std::string exe, std::vector<std::string> argv)
      : c_(std::move(c)), exe_(std::move(exe)), argv_(std::move(argv)) {}
  ~Launcher() {
    kill_all();
    if (!run_dir_.empty() && !c_.keep_run_dir) {
      std::error_code ec;
      std::filesystem::remove_all(run_dir_, ec);
    }
  }
  int run();

 private:
  void resolve();
  void print_header();
  void spawn(WorkerProc& w);
  void reap();
  void read_status();
  void read_results();
  void kill_all();
  void flush_footers(size_t upto) {
    for (; footers_ < upto && footers_ < results_.size(); ++footers_) print_table_footer(stdout, results_[footers_]);
  }
  int fail(const std::string& why);
  int finish();
  std::string where(const WorkerProc& w) const { return "'" + w.status_text + "'"; }

  Config c_;
  std::string exe_;
  std::vector<std::string> argv_;
  gpu::Probe probe_;
  std::string backend_;
  int world_ = 0;
  bool sharing_ = false;  // CUDA ranks share GPUs (ACTORCC_CUDA_SHARE_GPU=1, more ranks than GPUs)
  std::vector<WorkerProc> workers_;
  std::vector<int> order_;
  std::string run_dir_;
  std::string id_hex_;
  // results
  std::vector<ImplResult> results_;
  std::string nccl_version_;
  bool done_ = false;
  size_t results_offset_ = 0;
  size_t footers_ = 0;  // results whose footer is printed
  std::vector<std::vector<std::string>> peers_;
  std::string partial_;
  Clock::time_point last_progress_;
};

}  // namespace actorcc::bench
