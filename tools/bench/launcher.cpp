// The launcher: what a user runs. It resolves the configuration, creates the group's UniqueId
// (starting the bootstrap root in this process, as a Ray driver would), starts one worker per
// rank by re-executing this binary with --worker (actors: one GPU visible each, started one by
// one; torchrun: all GPUs visible, started together), prints results as rank 0 reports them,
// and turns any worker failure, hang or wrong result into a non-zero exit that names the rank
// and the message size. Workers live in their own process groups and die with the launcher
// (PR_SET_PDEATHSIG); every exit path kills what is left of them.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "actorcc/actorcc.hpp"
#include "bench.hpp"
#include "gpu.hpp"
#include "report.hpp"
#include "sysinfo.hpp"

extern char** environ;

namespace actorcc::bench {
namespace {

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

// Sets the handler of the signals that stop a run (Ctrl-C, kill, a closed terminal).
// Async-signal-safe: the child calls it between fork and exec.
void handle_stop_signals(void (*handler)(int)) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

using Clock = std::chrono::steady_clock;
double secs_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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

// A failure the rank itself caused (as opposed to noticing another rank's failure).
bool primary_failure(const WorkerProc& w) {
  if (!w.exited || w.killed_by_us) return false;
  if (WIFSIGNALED(w.status)) return true;
  int rc = WEXITSTATUS(w.status);
  return rc != kExitOk && rc != kExitRemote && rc != kExitTimeout;
}

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

void Launcher::resolve() {
  if (c_.backend != "cpu") probe_ = gpu::probe();
  int ngpu = static_cast<int>(probe_.devices.size());
  if (c_.backend == "auto") backend_ = ngpu > 0 ? "cuda" : "cpu";
  else backend_ = c_.backend;
  if (backend_ == "cuda" && ngpu == 0)
    throw InvalidArgument("--backend cuda: no usable GPU (" + (probe_.error.empty() ? "none found" : probe_.error) + ")");
  c_.backend = backend_;
  if (backend_ == "cuda") {
    world_ = c_.gpus ? c_.gpus : (c_.ranks ? c_.ranks : ngpu);
    // ACTORCC_CUDA_SHARE_GPU=1 (the library's setting, inherited by the workers): more ranks
    // than GPUs, assigned round-robin, so the 3-8 rank kernel paths run where one GPU is lent.
    const char* share = std::getenv("ACTORCC_CUDA_SHARE_GPU");
    sharing_ = share && std::string(share) == "1" && world_ > ngpu;
    if (world_ > ngpu && !sharing_)
      throw InvalidArgument("asked for " + std::to_string(world_) + " GPUs but " + std::to_string(ngpu) +
                            " are visible (ACTORCC_CUDA_SHARE_GPU=1 lets ranks share them)");
  } else {
    world_ = c_.ranks ? c_.ranks : (c_.gpus ? c_.gpus : 4);
    if (c_.graph > 0) throw InvalidArgument("-G (CUDA graphs) needs the CUDA backend");
  }
  if (world_ < 1) throw InvalidArgument("need at least one rank");
  if (c_.nodes > world_) throw InvalidArgument("--nodes exceeds the number of ranks");
  if (c_.root < 0 || c_.root >= world_) throw InvalidArgument("-r: root out of range");
  // NCCL refuses two ranks of one host on one GPU; virtual nodes (--nodes, distinct
  // NCCL_HOSTID) are separate hosts to it, so ranks of different nodes may share one.
  const int per_node = (world_ + c_.nodes - 1) / c_.nodes;
  const bool nccl_sharing = sharing_ && per_node > ngpu;
  if (c_.max_bytes == 0) c_.max_bytes = std::max(c_.min_bytes, backend_ == "cuda" ? size_t(64) << 20 : size_t(1) << 20);
  if (c_.impls.empty() && !c_.impls_explicit) {
    c_.impls = {"actorcc"};
    if (backend_ == "cuda" && !nccl_sharing) c_.impls.push_back("nccl");
  }
  bool wants_nccl = c_.nccl_symmetric || std::find(c_.impls.begin(), c_.impls.end(), "nccl") != c_.impls.end();
  if (wants_nccl && backend_ != "cuda") throw InvalidArgument("the NCCL baseline needs GPUs (this run uses the CPU backend)");
  if (wants_nccl && nccl_sharing)
    throw InvalidArgument("the NCCL baseline needs one GPU per rank of a node (NCCL refuses two ranks of one host "
                          "sharing a GPU; ranks of different --nodes may share one)");
  if (wants_nccl) c_.nccl_lib = resolve_nccl_lib(c_);
  if (c_.launch == Launch::Torchrun) c_.stagger_s = 0;

  order_.resize(world_);
  for (int r = 0; r < world_; ++r) order_[r] = r;
  if (c_.order == Order::Random) {
    if (c_.seed == 0) c_.seed = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) | 1;
    std::mt19937_64 rng(c_.seed);
    std::shuffle(order_.begin(), order_.end(), rng);
  }

  // Rank -> GPU and per-worker environment.
  std::vector<std::string> parent_visible;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) parent_visible = split(v, ',');
  workers_.resize(world_);
  for (int r = 0; r < world_; ++r) {
    WorkerProc& w = workers_[r];
    w.rank = r;
    int node = std::min(r / per_node, c_.nodes - 1);
    int local = r - node * per_node;
    if (backend_ == "cuda") {
      w.gpu = (c_.permute ? world_ - 1 - r : r) % ngpu;
      std::string ident = w.gpu < static_cast<int>(parent_visible.size()) ? parent_visible[w.gpu] : std::to_string(w.gpu);
      if (c_.launch == Launch::Actors) {
        w.device = 0;
        w.env.push_back("CUDA_VISIBLE_DEVICES=" + ident);
      } else {
        w.device = w.gpu;
      }
    }
    if (c_.launch == Launch::Torchrun) {
      w.env.push_back("RANK=" + std::to_string(r));
      w.env.push_back("WORLD_SIZE=" + std::to_string(world_));
      w.env.push_back("LOCAL_RANK=" + std::to_string(local));
      w.env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(std::min(per_node, world_ - node * per_node)));
    }
    if (c_.nodes > 1) {
      w.env.push_back("ACTORCC_NODE_ID=node" + std::to_string(node));
      w.env.push_back("NCCL_HOSTID=node" + std::to_string(node));
    }
    w.env.push_back("NCCL_NVLS_ENABLE=0");
    // actorcc's own NCCL transport (groups across nodes, GPUs without P2P) loads the library the
    // baseline runs, unless the user chose one: a comparison of one NCCL with itself, not of two
    // NCCL builds (the system's and PyTorch's differ on the device machine).
    const char* chosen = std::getenv("ACTORCC_NCCL_LIB");
    if (wants_nccl && !(chosen && *chosen)) w.env.push_back("ACTORCC_NCCL_LIB=" + c_.nccl_lib);
  }
}

void Launcher::print_header() {
  std::printf("# actorcc-bench %s: %s %s %s, %d ranks on the %s backend", actorcc::version(),
              std::string(to_string(c_.coll)).c_str(), nccl_tests_type_name(c_.dtype),
              std::string(to_string(c_.op)).c_str(), world_, backend_.c_str());
  if (c_.nodes > 1) std::printf(" in %d virtual nodes", c_.nodes);
  std::printf("\n# launch %s", launch_name(c_.launch));
  const char* sees = backend_ != "cuda"                ? ""
                     : c_.launch == Launch::Actors ? "each worker sees one GPU; "
                                                   : "every worker sees all GPUs; ";
  if (c_.launch == Launch::Actors)
    std::printf(" (%sstarted %.3g s apart, %s order)", sees, c_.stagger_s, order_name(c_.order));
  else
    std::printf(" (%sstarted together)", sees);
  if (c_.permute) std::printf(", permuted");
  const std::string n = c_.iters > 0 ? std::to_string(c_.iters) : "200 up to 16M, 20 above";
  std::printf("\n# sizes %s..%s, -f %g, -n %s, -w %d, -c %d, -G %d, %s\n", format_size(c_.min_bytes).c_str(),
              format_size(c_.max_bytes).c_str(), c_.step_factor, n.c_str(), c_.warmup, c_.check ? 1 : 0, c_.graph,
              c_.inplace ? "in-place" : "out-of-place");
  std::string impls;
  for (auto& s : c_.impls) impls += (impls.empty() ? "" : ",") + s;
  if (c_.nccl_symmetric) impls += (impls.empty() ? "" : ",") + std::string("nccl-symmetric");
  std::printf("# implementations: %s", impls.c_str());
  if (!c_.nccl_lib.empty()) std::printf(" (NCCL from %s)", c_.nccl_lib.c_str());
  std::printf("\n");
  if (backend_ == "cuda") {
    std::printf("# rank -> GPU:");
    for (auto& w : workers_) std::printf(" %d:%d", w.rank, w.gpu);
    std::printf("\n");
  }
  if (c_.order == Order::Random) {
    std::printf("# start order (seed %llu):", static_cast<unsigned long long>(c_.seed));
    for (int r : order_) std::printf(" %d", r);
    std::printf("\n");
  }
  std::fflush(stdout);
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

void Launcher::read_status() {
  for (auto& w : workers_) {
    if (!w.started) continue;
    std::ifstream f(run_dir_ + "/rank" + std::to_string(w.rank) + ".status");
    std::string line;
    if (!std::getline(f, line)) continue;
    auto tab = line.find('\t');
    if (tab == std::string::npos) continue;
    uint64_t seq = std::strtoull(line.substr(0, tab).c_str(), nullptr, 10);
    if (seq != w.status_seq) {
      w.status_seq = seq;
      w.status_text = line.substr(tab + 1);
      last_progress_ = Clock::now();
    }
  }
}

void Launcher::read_results() {
  std::ifstream f(run_dir_ + "/results.tsv", std::ios::binary);
  if (!f) return;
  f.seekg(static_cast<std::streamoff>(results_offset_));
  std::string chunk((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  results_offset_ += chunk.size();
  partial_ += chunk;
  size_t nl;
  while ((nl = partial_.find('\n')) != std::string::npos) {
    std::string line = partial_.substr(0, nl);
    partial_.erase(0, nl + 1);
    if (line.rfind("peer\t", 0) == 0) {
      std::vector<std::string> f;
      std::stringstream ss(line);
      std::string item;
      while (std::getline(ss, item, '\t')) f.push_back(item);
      if (f.size() >= 10) {
        std::printf("# rank %s: host %s pid %s, node %s local rank %s, GPU %s (%s), CUDA_VISIBLE_DEVICES=%s\n",
                    f[1].c_str(), f[2].c_str(), f[3].c_str(), f[4].c_str(), f[5].c_str(), f[6].c_str(), f[7].c_str(),
                    f[8].c_str());
        std::fflush(stdout);
        peers_.push_back(f);
      }
      continue;
    }
    std::string kind = apply_line(line, results_, &nccl_version_);
    if (kind == "impl") flush_footers(results_.size() - 1);
    if (kind == "startup") {
      print_startup(stdout, results_.back());
      print_table_header(stdout, results_.back());
    } else if (kind == "row") {
      print_row(stdout, results_.back().rows.back(), c_);
    } else if (kind == "skip") {
      flush_footers(results_.size());
    } else if (kind == "done") {
      done_ = true;
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

int Launcher::fail(const std::string& why) {
  read_status();
  read_results();
  std::fflush(stdout);
  std::fprintf(stderr, "actorcc-bench: FAILED: %s\n", why.c_str());
  kill_all();
  for (auto& w : workers_) {
    std::string state = w.started ? describe_exit(w) : "not started";
    std::fprintf(stderr, "actorcc-bench:   rank %d (pid %d%s): %s, last at '%s'\n", w.rank, static_cast<int>(w.pid),
                 w.gpu >= 0 ? (", GPU " + std::to_string(w.gpu)).c_str() : "", state.c_str(), w.status_text.c_str());
  }
  return kExitFailed;
}

int Launcher::run() {
  resolve();
  char tmpl[] = "/tmp/actorcc-bench.XXXXXX";
  std::string base = std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) + "/actorcc-bench.XXXXXX" : tmpl;
  std::vector<char> buf(base.begin(), base.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
  run_dir_ = buf.data();

  print_header();
  // The group's id: starts the bootstrap root in this process, like a Ray driver making the
  // id that it hands to its actors.
  id_hex_ = UniqueId::create(c_.addr).to_string();

  handle_stop_signals(on_signal);

  auto t_start = Clock::now();
  last_progress_ = t_start;
  size_t next = 0;
  Clock::time_point next_at = t_start;
  Clock::time_point first_failure{};
  bool failing = false;
  const double stall_limit = c_.timeout_s + 5;
  const double grace = 1.5;  // time for the other ranks to report after the first failure

  for (;;) {
    if (g_signal) {
      std::fprintf(stderr, "actorcc-bench: interrupted (%s); stopping every worker\n", strsignal(g_signal));
      fail("interrupted by " + std::string(strsignal(g_signal)));
      return kExitInterrupted;
    }
    if (!failing && next < order_.size() && Clock::now() >= next_at) {
      WorkerProc& w = workers_[order_[next]];
      spawn(w);
      if (c_.launch == Launch::Actors && world_ > 1) {
        std::printf("# started rank %d (pid %d%s) at +%.2f s\n", w.rank, static_cast<int>(w.pid),
                    w.gpu >= 0 ? (", GPU " + std::to_string(w.gpu)).c_str() : "", secs_since(t_start));
        std::fflush(stdout);
      }
      ++next;
      double gap = c_.launch == Launch::Actors ? c_.stagger_s : 0.0;
      next_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap));
      if (gap == 0) continue;
    }
    reap();
    read_status();
    read_results();

    bool all_done = next == order_.size();
    bool any_failed = false;
    for (auto& w : workers_) {
      if (!w.started || !w.exited) {
        all_done = false;
        continue;
      }
      if (!(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0)) any_failed = true;
    }
    if (any_failed && !failing) {
      failing = true;
      first_failure = Clock::now();
    }
    if (failing) {
      bool alive = false;
      for (auto& w : workers_) alive |= w.started && !w.exited;
      if (!alive || secs_since(first_failure) >= grace) {
        std::vector<const WorkerProc*> primary, hung;
        for (auto& w : workers_) {
          if (primary_failure(w)) primary.push_back(&w);
          if (w.started && !w.exited) hung.push_back(&w);
        }
        std::string why;
        if (!primary.empty()) {
          // The first to fail is most likely the cause: name it first.
          std::stable_sort(primary.begin(), primary.end(),
                           [](const WorkerProc* a, const WorkerProc* b) { return a->exited_at < b->exited_at; });
          for (auto* w : primary)
            why += (why.empty() ? "" : "; ") + std::string("rank ") + std::to_string(w->rank) + " failed (" +
                   describe_exit(*w) + ") during " + where(*w);
        } else if (!hung.empty()) {
          for (auto* w : hung)
            why += (why.empty() ? "" : "; ") + std::string("rank ") + std::to_string(w->rank) +
                   " stopped responding during " + where(*w) + " (the other ranks timed out waiting for it)";
        } else {
          for (auto& w : workers_)
            if (w.exited && !(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0))
              why += (why.empty() ? "" : "; ") + std::string("rank ") + std::to_string(w.rank) + " " +
                     describe_exit(w) + " during " + where(w);
        }
        return fail(why);
      }
    } else if (all_done) {
      return finish();
    } else if (next == order_.size() && secs_since(last_progress_) > stall_limit) {
      // Nobody moved: name the ranks that are furthest behind.
      uint64_t low = UINT64_MAX;
      for (auto& w : workers_)
        if (w.started && !w.exited) low = std::min(low, w.status_seq);
      std::string why;
      for (auto& w : workers_)
        if (w.started && !w.exited && w.status_seq == low)
          why += (why.empty() ? "" : ", ") + std::string("rank ") + std::to_string(w.rank) + " at " + where(w);
      char head[160];
      std::snprintf(head, sizeof head, "no progress for %.0f s (--timeout %.0f); behind: ", stall_limit, c_.timeout_s);
      return fail(head + why);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int Launcher::finish() {
  read_status();
  read_results();
  flush_footers(results_.size());
  if (!done_) {
    std::fprintf(stderr, "actorcc-bench: FAILED: every worker exited 0 but rank 0 reported no end of run\n");
    return kExitFailed;
  }
  print_comparison(stdout, results_);
  int rc = kExitOk;

  // Wrong results: name the implementation, size and ranks.
  for (auto& r : results_)
    for (auto& row : r.rows)
      if (row.wrong) {
        std::string ranks;
        for (auto& part : split(row.wrong_ranks, ',')) {
          auto colon = part.find(':');
          ranks += (ranks.empty() ? "" : ", ") + std::string("rank ") + part.substr(0, colon) + ": " +
                   part.substr(colon + 1) + " wrong elements";
        }
        std::fprintf(stderr, "actorcc-bench: WRONG RESULTS: %s %s %zu B: %s\n", r.impl.c_str(),
                     std::string(to_string(c_.coll)).c_str(), row.bytes, ranks.c_str());
        rc = kExitWrong;
      }
  for (auto& r : results_)
    if (!r.skipped.empty() && c_.impls_explicit) {
      std::fprintf(stderr, "actorcc-bench: FAILED: %s was asked for but could not run: %s\n", r.impl.c_str(),
                   r.skipped.c_str());
      if (rc == kExitOk) rc = kExitFailed;
    }

  if (!c_.json_path.empty()) {
    RunInfo info;
    info.config = c_;
    info.world = world_;
    info.backend = backend_;
    info.start_order = order_;
    info.peers = peers_;
    for (auto& w : workers_)
      if (w.gpu >= 0) info.rank_gpu.push_back(w.gpu);
    info.date = iso_date();
    for (auto& a : argv_) info.command += (info.command.empty() ? "" : " ") + a;
    MachineInfo& m = info.machine;
    m = machine_info(probe_, backend_ == "cuda");
    if (!nccl_version_.empty()) m.nccl = nccl_version_;
    std::error_code ec;
    auto parent = std::filesystem::path(c_.json_path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    std::ofstream f(c_.json_path);
    f << to_json(info, results_);
    if (!f) {
      std::fprintf(stderr, "actorcc-bench: cannot write %s\n", c_.json_path.c_str());
      return kExitFailed;
    }
    f.close();
    std::printf("# wrote %s\n", c_.json_path.c_str());

    if (c_.plot) write_plot(c_.json_path, c_.plot_script);
  }
  std::fflush(stdout);
  return rc;
}

}  // namespace

int launcher_main(Config c, const std::string& self_exe, const std::vector<std::string>& argv) {
  Launcher l(std::move(c), self_exe, argv);
  return l.run();
}

}  // namespace actorcc::bench
