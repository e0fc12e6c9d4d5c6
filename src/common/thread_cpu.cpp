#include "common/thread_cpu.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iomanip>
#include <sstream>

#include "common/proc_file.hpp"

namespace actorcc {

std::optional<ThreadCpu> thread_cpu() noexcept {
  // The time on a CPU from the thread's clock, which counts the running slice up to now
  // (schedstat's first field lags by up to a scheduler tick); the wait from schedstat's second.
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return std::nullopt;
  char buf[128];
  uint64_t run_ns = 0, wait_ns = 0;
  if (!read_proc("/proc/thread-self/schedstat", buf) ||
      std::sscanf(buf, "%" SCNu64 " %" SCNu64, &run_ns, &wait_ns) != 2)
    return std::nullopt;
  ThreadCpu t{static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6,
              static_cast<double>(wait_ns) / 1e6};
  // stat: "pid (comm) state ..." with minflt the 10th field and majflt the 12th; comm may hold
  // spaces and parentheses, so the fields are counted from the last ')'.
  char sb[1024];
  if (read_proc("/proc/thread-self/stat", sb))
    if (const char* rp = std::strrchr(sb, ')'))
      std::sscanf(rp + 1, " %*c %*d %*d %*d %*d %*d %*u %lu %*u %lu", &t.minor_faults, &t.major_faults);
  return t;
}

std::string thread_cpu_since(const std::optional<ThreadCpu>& start) {
  const std::optional<ThreadCpu> now = thread_cpu();
  if (!start || !now) return "";
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << "; this thread since then: " << now->on_cpu_ms - start->on_cpu_ms
     << " ms on a CPU, " << now->waited_ms - start->waited_ms << " ms waiting for one, "
     << now->minor_faults + now->major_faults - start->minor_faults - start->major_faults << " page faults ("
     << now->major_faults - start->major_faults << " major)";
  return os.str();
}

}  // namespace actorcc
