// Departures: the ranks that closed their communicator, and how many collective calls each had
// issued by then. Every collective call past that count needs a rank that is gone; this rank's
// calls are counted here too, so that such a call is refused (or, already in flight, aborted)
// naming the leaver instead of waiting out its timeout.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "common/abort_signal.hpp"
#include "group/group_context.hpp"

namespace actorcc {

class Departures {
 public:
  // For rank `rank` of a group of `world`, before any departure can be reported.
  void start(int rank, int world);

  // The reader thread's news of a clean leave. A collective this rank has already issued past
  // the leaver's count (a GPU kernel waiting for it, a CPU call in its wait) can never finish:
  // the group's abort ends it now, naming the leaver, instead of its timeout. Calls issued
  // later fail in enter(). The counter's seq_cst order against enter()'s makes one of the two
  // see the other.
  void on_departure(const Bootstrap::Departure& d, AbortSignal& abort);

  // Counts a collective call and refuses one that needs a rank that has left (every later
  // collective does). Refused here, not aborted: every rank refuses the same calls by the same
  // rule, and an abort would also cut short the point-to-point calls still running between
  // the others, which may go on; a call to or from the leaver fails the same way.
  void enter(const CollArgs& a);

  // Collective calls issued (validated and handed to the backend): what this rank's goodbye
  // tells the others.
  uint64_t issued() const { return collectives_.load(); }

 private:
  int rank_ = -1, world_ = 0;
  // Written by calls and by the bootstrap's reader thread.
  std::atomic<uint64_t> collectives_{0};
  std::mutex mu_;
  std::vector<std::optional<uint64_t>> left_after_;
};

}  // namespace actorcc
