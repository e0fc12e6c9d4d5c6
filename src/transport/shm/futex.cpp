#include "transport/shm/futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace actorcc::futex {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
              "futex words must be plain lock-free 32-bit atomics");

void wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::microseconds timeout) noexcept {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
  ts.tv_nsec = static_cast<long>((timeout.count() % 1000000) * 1000);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void wake_all(std::atomic<uint32_t>* word) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace actorcc::futex
