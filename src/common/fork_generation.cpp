#include "common/fork_generation.hpp"

#include <pthread.h>

#include <atomic>

namespace actorcc {

namespace {
std::atomic<uint32_t> g_generation{0};
}  // namespace

uint32_t fork_generation() noexcept {
  // Registered before the first object records a generation, so every later fork counts.
  static const bool registered = [] {
    return ::pthread_atfork(nullptr, nullptr, [] { g_generation.fetch_add(1, std::memory_order_relaxed); }) == 0;
  }();
  (void)registered;
  return g_generation.load(std::memory_order_relaxed);
}

}  // namespace actorcc
