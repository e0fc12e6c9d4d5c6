#include "common/fd_table.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "common/proc_file.hpp"
#include "common/unique_fd.hpp"

namespace actorcc {

namespace {

// What a growth found and did, for the debug note.
struct FdTableGrowth {
  const char* when = "at load";  // or "after fork"
  int slots_before = 0;          // /proc/self/status FDSize; 0 where unknown
  int slots_after = 0;
  int threads = 0;  // the process's threads then: with more than one, the growth waited
  double ms = 0;    // for a grace period, taking `ms`
};

// The number after `key` in `text`, or 0. By hand rather than sscanf: this also runs in a child
// of fork(), where only async-signal-safe work is sure to be safe.
int field(const char* text, const char* key) noexcept {
  const char* p = std::strstr(text, key);
  if (!p) return 0;
  p += std::strlen(key);
  while (*p == ' ' || *p == '\t') ++p;
  int v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) v = v * 10 + (*p - '0');
  return v;
}

// FDSize (the table's slots) and Threads of /proc/self/status; 0 for what it does not say.
void read_status(int& slots, int& threads) noexcept {
  char buf[4096];
  slots = threads = 0;
  if (!read_proc("/proc/self/status", buf)) return;
  slots = field(buf, "\nFDSize:");
  threads = field(buf, "\nThreads:");
}

double now_ms() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

FdTableGrowth grow(const char* when) noexcept {
  FdTableGrowth g;
  g.when = when;
  read_status(g.slots_before, g.threads);
  rlimit lim{};
  long want = kFdTableSlots;
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    want = std::min<long>(want, static_cast<long>(lim.rlim_cur));
  g.slots_after = g.slots_before;
  if (want < 1 || g.slots_before >= want) return g;
  // F_DUPFD takes the lowest free descriptor at or above the slot asked for, so no descriptor
  // of the process is touched; closing it leaves the table at its new size (tables never shrink).
  const double t0 = now_ms();
  UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (null) UniqueFd high(::fcntl(null.get(), F_DUPFD_CLOEXEC, static_cast<int>(want - 1)));
  g.ms = now_ms() - t0;
  int threads_now = 0;
  read_status(g.slots_after, threads_now);
  return g;
}

// The last growth: at the library's load, or in this child of fork().
FdTableGrowth g_last;

// Runs while the library loads (libactorcc.so, libnccl.so.2): before any thread of ours exists,
// and usually before the program starts threads of its own.
const bool g_loaded = [] {
  g_last = grow("at load");
  ::pthread_atfork(nullptr, nullptr, [] { g_last = grow("after fork"); });
  return true;
}();

}  // namespace

std::string fd_table_note() {
  const FdTableGrowth g = g_last;
  std::ostringstream os;
  os << "the descriptor table: " << g.slots_after << " slots";
  if (g.slots_after > g.slots_before)
    os << ", grown from " << g.slots_before << " " << g.when << " (" << g.threads
       << (g.threads == 1 ? " thread, " : " threads, ") << std::fixed << std::setprecision(2) << g.ms << " ms)";
  else
    os << ", not grown " << g.when;
  return os.str();
}

}  // namespace actorcc
