#include "common/log.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

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
  char head[64];
  const int n = std::snprintf(head, sizeof head, "[actorcc %s pid %d %02lld:%02lld:%02lld.%06lld] ",
                              names[static_cast<int>(lv)], static_cast<int>(getpid()), s / 3600, s / 60 % 60, s % 60,
                              us % 1000000);
  std::string line(head, n > 0 ? std::min<size_t>(n, sizeof head - 1) : 0);
  line += msg;
  line += '\n';
  // One write() per line, past stdio: the ranks of a group often share one stderr (a file or a
  // pipe), and stdio may write a line in pieces (newer glibc writes an unbuffered stream's
  // fprintf 128 bytes at a time), so another rank's line lands inside it and the tools that read
  // these lines (bench/first_call_split.py) lose it.
  std::lock_guard<std::mutex> g(mu);
  std::fflush(stderr);  // what the process wrote through stdio before comes first
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;  // nowhere to log to: the line is dropped, as fprintf would
    p += w;
    left -= static_cast<size_t>(w);
  }
}

}  // namespace actorcc::log
