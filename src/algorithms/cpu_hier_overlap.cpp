#include "algorithms/cpu_hier_overlap.hpp"

namespace actorcc::cpu {

NetHelper::NetHelper() : thread_([this] { loop(); }) {}

NetHelper::~NetHelper() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t NetHelper::post(std::function<void()> job) {
  std::lock_guard<std::mutex> l(mu_);
  jobs_.push_back(std::move(job));
  cv_.notify_all();
  return ++posted_;
}

uint64_t NetHelper::last_posted() const {
  std::lock_guard<std::mutex> l(mu_);
  return posted_;
}

void NetHelper::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return finished_ >= ticket; });
  if (err_ && finished_ == posted_) {
    // Everything posted has run or been skipped: the error is delivered once.
    auto e = err_;
    err_ = nullptr;
    std::rethrow_exception(e);
  }
  if (err_) std::rethrow_exception(err_);
}

void NetHelper::loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stop_, nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    if (!err_) {
      l.unlock();
      std::exception_ptr e;
      try {
        job();
      } catch (...) {
        e = std::current_exception();
      }
      l.lock();
      if (e) err_ = e;
    }
    ++finished_;
    cv_.notify_all();
  }
}

Overlap::~Overlap() {
  try {
    helper_.wait(helper_.last_posted());
  } catch (...) {
  }
}

void Overlap::noted(int side, const std::exception& e) {
  int none = -1;
  if (first_.compare_exchange_strong(none, side)) fail_group_(e);
}

uint64_t Overlap::post(std::function<void()> net_side) {
  return helper_.post([this, f = std::move(net_side)] {
    try {
      f();
    } catch (const std::exception& e) {
      noted(1, e);
      throw;
    }
  });
}

void Overlap::fail_here() {
  auto mine = std::current_exception();
  try {
    helper_.wait(helper_.last_posted());
  } catch (...) {
    net_err_ = std::current_exception();
  }
  if (first_.load() == 1 && net_err_) std::rethrow_exception(net_err_);
  std::rethrow_exception(mine);
}

void Overlap::here(const std::function<void()>& node_side) {
  try {
    node_side();
  } catch (const std::exception& e) {
    noted(0, e);
    fail_here();
  }
}

// A failed job has failed the group already (post above); nothing more of it runs.
void Overlap::wait(uint64_t ticket) { helper_.wait(ticket); }

}  // namespace actorcc::cpu
