// A point in time every blocking wait is bounded by.
#pragma once
#include <chrono>

namespace actorcc {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after(std::chrono::milliseconds d) { return Deadline(Clock::now() + d); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point t) : t_(t) {}
  bool expired() const { return Clock::now() >= t_; }
  std::chrono::milliseconds remaining() const {
    auto now = Clock::now();
    if (now >= t_) return std::chrono::milliseconds(0);
    if (t_ == Clock::time_point::max()) return std::chrono::hours(24 * 365);
    return std::chrono::duration_cast<std::chrono::milliseconds>(t_ - now);
  }
  Clock::time_point when() const { return t_; }
  Deadline earliest(const Deadline& o) const { return t_ < o.t_ ? *this : o; }

 private:
  Clock::time_point t_;
};

}  // namespace actorcc
