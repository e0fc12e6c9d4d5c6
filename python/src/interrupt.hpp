// Ctrl-C during a blocking wait. The bindings release the GIL while a call, a join or a
// synchronisation waits, so Python's own SIGINT handler only flags the signal, and
// KeyboardInterrupt came when the wait ended: at the call's timeout (300 s by default) or the
// join's (600 s). A relay in front of Python's handler wakes a watcher thread, which ends the
// waits in progress (an abort of the group, naming this rank, so the others learn at once too);
// the binding then raises what Python's handler raises (KeyboardInterrupt).
#pragma once
#include <functional>

#include "bindings.hpp"

namespace actorcc::py {

// While alive (with the GIL released), a SIGINT runs `on_interrupt` on the watcher thread, or
// in the destructor where the wait ended before the watcher ran. Nothing is installed where
// SIGINT is ignored or left to its default action.
class Interruptible {
 public:
  explicit Interruptible(std::function<void()> on_interrupt);
  ~Interruptible();
  Interruptible(const Interruptible&) = delete;
  Interruptible& operator=(const Interruptible&) = delete;

 private:
  std::function<void()> fn_;
  bool registered_ = false;
  unsigned signals_ = 0;  // the relay's count of SIGINTs when this wait began
};

// Runs `wait` without the GIL (it makes its Interruptible once it holds what the interrupt
// touches). When `wait` throws and a signal is pending, raises the signal's Python exception
// instead: the actorcc error it caused is the consequence, not the cause.
template <typename Wait>
void interruptible(Wait&& wait) {
  try {
    nb::gil_scoped_release nogil;
    wait();
  } catch (...) {
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
    throw;
  }
}

// The reason the group is told.
inline constexpr const char* kInterruptReason = "interrupted by SIGINT (Ctrl-C / KeyboardInterrupt)";

}  // namespace actorcc::py
