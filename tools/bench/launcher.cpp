// The launcher's run (launcher.hpp says what the launcher does): the workers started in
// order, stagger apart, then watched until all exit 0, one fails, nobody moves within the
// timeout, or a stop signal arrives; a failure names the rank that caused it first.
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "actorcc/actorcc.hpp"

#include "launcher.hpp"

namespace actorcc::bench {

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

int launcher_main(Config c, const std::string& self_exe, const std::vector<std::string>& argv) {
  Launcher l(std::move(c), self_exe, argv);
  return l.run();
}

}  // namespace actorcc::bench
