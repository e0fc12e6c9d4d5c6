// Watchdog: a thread that calls `poll` every `period` until poll returns true (it found what it
// watches for) or the owner is destroyed. RAII: the destructor wakes the thread and joins it, so
// nothing poll touches can be used after its owner is gone. Used for errors that nothing else
// would report in time: a GPU kernel that gave up while no call of its communicator runs.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace actorcc {

class Watchdog {
 public:
  Watchdog(std::chrono::milliseconds period, std::function<bool()> poll)
      : period_(period), poll_(std::move(poll)), thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void loop() {
    std::unique_lock<std::mutex> g(mu_);
    while (!cv_.wait_for(g, period_, [this] { return stop_; })) {
      g.unlock();
      const bool done = poll_();
      g.lock();
      if (done) return;
    }
  }

  const std::chrono::milliseconds period_;
  const std::function<bool()> poll_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after everything it uses exists
};

}  // namespace actorcc
