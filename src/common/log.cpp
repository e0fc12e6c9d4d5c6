#include "common/log.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>

#include "common/env.hpp"

namespace actorcc::log {

Level level() {
  // setting: ACTORCC_LOG - error|warn|info|debug (default warn)
  static const Level lv = [] {
    auto v = env::get("ACTORCC_LOG");
    if (!v) return Level::Warn;
    if (*v == "error") return Level::Error;
    if (*v == "info") return Level::Info;
    if (*v == "debug") return Level::Debug;
    return Level::Warn;
  }();
  return lv;
}

void write(Level lv, const std::string& msg) {
  static std::mutex mu;
  static const char* names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
  // The wall clock's UTC time of day to the microsecond: lines of several processes (ranks, the
  // caller's own logs) then line up.
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const long long us = std::chrono::duration_cast<std::chrono::microseconds>(now).count() % 86400000000LL;
  const long long s = us / 1000000;
  std::lock_guard<std::mutex> g(mu);
  std::fprintf(stderr, "[actorcc %s pid %d %02lld:%02lld:%02lld.%06lld] %s\n", names[static_cast<int>(lv)],
               static_cast<int>(getpid()), s / 3600, s / 60 % 60, s % 60, us % 1000000, msg.c_str());
  std::fflush(stderr);
}

}  // namespace actorcc::log
