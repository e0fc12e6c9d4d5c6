// The network side of a hierarchical CPU call on a helper thread, beside its node side on the
// calling thread: a pipelined collective's rail steps of chunk k run while the node steps of
// chunk k+1 do, and a point-to-point batch's TCP messages while its shared-memory ones do.
#pragma once
#include <atomic>
#include <exception>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace actorcc::cpu {

// One thread per rank, started with the backend and joined with it. Jobs run one at a time,
// in the order posted. Every job is bounded by its own deadline and the group's abort, so
// waiting for one is too. After a job fails the rest are skipped (the group is broken).
class NetHelper {
 public:
  NetHelper();
  ~NetHelper();
  NetHelper(const NetHelper&) = delete;
  NetHelper& operator=(const NetHelper&) = delete;

  // Returns the job's ticket.
  uint64_t post(std::function<void()> job);
  // Waits until job `ticket` (and every one before it) has run; rethrows a failed job's error.
  void wait(uint64_t ticket);
  uint64_t last_posted() const;

 private:
  void loop();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  uint64_t posted_ = 0, finished_ = 0;
  std::exception_ptr err_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

// One call's two sides. Whichever side fails first fails the whole group with its cause
// (`fail_group`: every rank's waits stop, the other side's at once); the caller's buffers
// stay in use until both sides have stopped, so a failure waits for the helper before the
// first cause is thrown.
class Overlap {
 public:
  Overlap(NetHelper& helper, std::function<void(const std::exception&)> fail_group)
      : helper_(helper), fail_group_(std::move(fail_group)) {}
  ~Overlap();  // waits for what is still posted (the error path), never throws

  uint64_t post(std::function<void()> net_side);
  // Runs `node_side` here.
  void here(const std::function<void()>& node_side);
  void wait(uint64_t ticket);
  void wait_all() { wait(helper_.last_posted()); }

 private:
  void noted(int side, const std::exception& e);
  [[noreturn]] void fail_here();
  NetHelper& helper_;
  std::function<void(const std::exception&)> fail_group_;
  std::atomic<int> first_{-1};  // 0: this thread failed first, 1: the helper
  std::exception_ptr net_err_;
};

}  // namespace actorcc::cpu
