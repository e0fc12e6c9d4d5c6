// A point in time every blocking wait is bounded by.
//
// Arithmetic saturates: a duration too long to add to now() (milliseconds::max(), which is how
// an infinite timeout is spelled) gives Deadline::never(), never a wrapped-around time in the
// past. A never-deadline still lets every wait check its AbortSignal, so "wait forever" stays
// abortable.
#pragma once
#include <chrono>

namespace actorcc {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after(std::chrono::milliseconds d) {
    auto now = Clock::now();
    if (d.count() <= 0) return Deadline(now);
    // Compare in the clock's own unit before adding, so the sum cannot overflow.
    auto room = Clock::time_point::max() - now;
    if (d >= std::chrono::duration_cast<std::chrono::milliseconds>(room)) return never();
    return Deadline(now + d);
  }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point t) : t_(t) {}
  bool expired() const { return Clock::now() >= t_; }
  bool is_never() const { return t_ == Clock::time_point::max(); }
  std::chrono::milliseconds remaining() const {
    auto now = Clock::now();
    if (now >= t_) return std::chrono::milliseconds(0);
    if (is_never()) return std::chrono::milliseconds::max();
    return std::chrono::duration_cast<std::chrono::milliseconds>(t_ - now);
  }
  Clock::time_point when() const { return t_; }
  Deadline earliest(const Deadline& o) const { return t_ < o.t_ ? *this : o; }

 private:
  Clock::time_point t_;
};

}  // namespace actorcc
