// The SIGINT relay and its watcher thread (interrupt.hpp says why).
#include "interrupt.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <thread>
#include <vector>

namespace actorcc::py {
namespace {

int g_pipe[2] = {-1, -1};
struct sigaction g_prev {};  // the handler the relay chains to (Python's)
// SIGINTs seen by the relay: a wait compares it at its end with its start (a lock-free atomic,
// so the relay may add to it).
std::atomic<unsigned> g_signals{0};
static_assert(std::atomic<unsigned>::is_always_lock_free);

void relay(int sig, siginfo_t* info, void* uctx) {
  const int saved = errno;
  g_signals.fetch_add(1, std::memory_order_relaxed);
  if (g_pipe[1] >= 0) {
    char b = 1;
    ssize_t ignored = ::write(g_pipe[1], &b, 1);  // async-signal-safe; a full pipe has a wake-up pending
    (void)ignored;
  }
  if (g_prev.sa_flags & SA_SIGINFO) {
    if (g_prev.sa_sigaction) g_prev.sa_sigaction(sig, info, uctx);
  } else if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN && g_prev.sa_handler) {
    g_prev.sa_handler(sig);
  }
  errno = saved;
}

struct Registry {
  std::mutex mu;
  std::vector<std::function<void()>*> waiting;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: the watcher may run at exit
  return *r;
}

void watch() {
  for (;;) {
    char buf[64];
    ssize_t k = ::read(g_pipe[0], buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;
    Registry& r = registry();
    std::lock_guard<std::mutex> g(r.mu);
    for (auto* fn : r.waiting) {
      try {
        (*fn)();
      } catch (...) {  // an abort that fails still lets the wait end at its own bound
      }
    }
  }
}

// Puts the relay in front of the current SIGINT handler when that is a function (Python's), and
// again after Python has replaced it (signal.signal). False where nothing was installed.
bool ensure_relay() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (::pipe2(g_pipe, O_CLOEXEC) != 0) return;
    std::thread(watch).detach();
  });
  if (g_pipe[1] < 0) return false;
  struct sigaction cur {};
  if (::sigaction(SIGINT, nullptr, &cur) != 0) return false;
  if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == relay) return true;
  if (!(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN)) return false;
  g_prev = cur;
  struct sigaction mine = cur;
  mine.sa_flags = (cur.sa_flags | SA_SIGINFO) & ~SA_RESETHAND;
  mine.sa_sigaction = relay;
  return ::sigaction(SIGINT, &mine, nullptr) == 0;
}

}  // namespace

Interruptible::Interruptible(std::function<void()> on_interrupt) : fn_(std::move(on_interrupt)) {
  if (!ensure_relay()) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  r.waiting.push_back(&fn_);
  signals_ = g_signals.load(std::memory_order_relaxed);
  registered_ = true;
}

Interruptible::~Interruptible() {
  if (!registered_) return;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> g(r.mu);
    std::erase(r.waiting, &fn_);
  }
  // A SIGINT during the wait whose watcher had not run yet when the wait ended on its own (the
  // call completed meanwhile): the interrupt still goes to the group now, so the others read
  // "interrupted by SIGINT" whichever came first. A second run after the watcher's is harmless:
  // an abort keeps its first cause.
  if (g_signals.load(std::memory_order_relaxed) != signals_) {
    try {
      fn_();
    } catch (...) {  // the KeyboardInterrupt still comes; the others then learn of the exit
    }
  }
}

}  // namespace actorcc::py
