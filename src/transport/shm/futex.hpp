// Futex wait/wake on 32-bit words in memory shared between processes (not FUTEX_PRIVATE:
// the waiters live in different address spaces).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>

namespace actorcc::futex {

// Sleeps while *word == expected, at most `timeout` (spurious and early returns are normal;
// callers re-check their condition).
void wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::microseconds timeout) noexcept;
// Wakes every waiter on `word`.
void wake_all(std::atomic<uint32_t>* word) noexcept;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace actorcc::futex
