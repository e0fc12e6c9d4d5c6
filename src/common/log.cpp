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
  std::lock_guard<std::mutex> g(mu);
  std::fprintf(stderr, "[actorcc %s pid %d] %s\n", names[static_cast<int>(lv)], static_cast<int>(getpid()),
               msg.c_str());
  std::fflush(stderr);
}

}  // namespace actorcc::log
