// Minimal leveled logging to stderr. ACTORCC_LOG=error|warn|info|debug (default warn).
#pragma once
#include <sstream>
#include <string>

namespace actorcc::log {

enum class Level : int { Error = 0, Warn = 1, Info = 2, Debug = 3 };
Level level();
void write(Level lv, const std::string& msg);

}  // namespace actorcc::log

#define ACTORCC_LOG(lv, expr)                                              \
  do {                                                                     \
    if (static_cast<int>(lv) <= static_cast<int>(::actorcc::log::level())) { \
      std::ostringstream actorcc_log_os_;                                  \
      actorcc_log_os_ << expr;                                             \
      ::actorcc::log::write(lv, actorcc_log_os_.str());                    \
    }                                                                      \
  } while (0)
#define LOG_WARN(expr) ACTORCC_LOG(::actorcc::log::Level::Warn, expr)
#define LOG_INFO(expr) ACTORCC_LOG(::actorcc::log::Level::Info, expr)
#define LOG_DEBUG(expr) ACTORCC_LOG(::actorcc::log::Level::Debug, expr)
#define LOG_ERROR(expr) ACTORCC_LOG(::actorcc::log::Level::Error, expr)
