// The calling thread's time on a CPU, waiting in a run queue for one, and its page faults (Linux:
// the thread's CPU clock and /proc/thread-self/schedstat and stat). A step that took long while
// its thread did little splits into "ready but not scheduled" (waited) and "blocked" (neither).
#pragma once
#include <optional>
#include <string>

namespace actorcc {

struct ThreadCpu {
  double on_cpu_ms = 0;
  double waited_ms = 0;
  // Page faults: a thread that is neither on a CPU nor waiting for one may be in a fault
  // (a major one reads from a file; a minor one may wait for the process's memory-map lock).
  unsigned long minor_faults = 0;
  unsigned long major_faults = 0;
};

// Nothing where the kernel does not keep the figures.
std::optional<ThreadCpu> thread_cpu() noexcept;

// "; this thread since then: X ms on a CPU, Y ms waiting for one, F page faults (M major)", or ""
// without figures; for a debug line about a step that began at `start` (thread_cpu() taken
// then, on this thread).
std::string thread_cpu_since(const std::optional<ThreadCpu>& start);

}  // namespace actorcc
