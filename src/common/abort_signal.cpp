#include "common/abort_signal.hpp"

#include <algorithm>

namespace actorcc {

void AbortSignal::raise(int culprit, ErrorCode code, const std::string& reason) {
  std::vector<std::function<void()>> run;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (raised_.load(std::memory_order_relaxed)) return;
    culprit_ = culprit;
    code_ = code;
    reason_ = reason;
    raised_.store(true, std::memory_order_release);
    run.swap(listeners_);
    listener_keys_.clear();
  }
  raised_cv_.notify_all();
  for (auto& fn : run) fn();
}

int AbortSignal::culprit() const {
  std::lock_guard<std::mutex> g(mu_);
  return culprit_;
}

std::string AbortSignal::reason() const {
  std::lock_guard<std::mutex> g(mu_);
  return reason_;
}

void AbortSignal::rethrow() const {
  const std::vector<int> also = lost();
  std::lock_guard<std::mutex> g(mu_);
  const std::string& m = reason_;  // Error adds "rank <self>: " (once, if reason_ lacks it)
  switch (code_) {
    case ErrorCode::Timeout: throw_with_culprits(TimeoutError(m, self_, culprit_), also);
    case ErrorCode::Remote: throw_with_culprits(RemoteError(m, culprit_, self_), also);
    case ErrorCode::InvalidArgument: throw_with_culprits(InvalidArgument(m, self_, culprit_), also);
    case ErrorCode::Cuda: throw_with_culprits(CudaError(m, self_, culprit_), also);
    case ErrorCode::System: throw_with_culprits(SystemError(m, self_, culprit_), also);
    default: throw_with_culprits(Error(code_, m, self_, culprit_), also);
  }
}

void AbortSignal::raise_lost(int rank, const std::string& reason) {
  raise(rank, ErrorCode::Remote, reason);
  if (rank < 0) return;
  std::lock_guard<std::mutex> g(loss_mu_);
  for (const auto& l : lost_)
    if (l.first == rank) return;
  lost_.emplace_back(rank, reason);
  for (auto& w : watches_) w.second(rank, reason);
}

std::vector<int> AbortSignal::lost() const {
  std::vector<int> v;
  {
    std::lock_guard<std::mutex> g(loss_mu_);
    for (const auto& l : lost_) v.push_back(l.first);
  }
  std::sort(v.begin(), v.end());
  return v;
}

AbortSignal::LossWatch::LossWatch(AbortSignal& s, std::function<void(int, const std::string&)> fn) : s_(s) {
  std::lock_guard<std::mutex> g(s_.loss_mu_);
  id_ = s_.next_watch_++;
  for (const auto& l : s_.lost_) fn(l.first, l.second);
  s_.watches_.emplace_back(id_, std::move(fn));
}

AbortSignal::LossWatch::~LossWatch() {
  std::lock_guard<std::mutex> g(s_.loss_mu_);
  std::erase_if(s_.watches_, [this](const auto& w) { return w.first == id_; });
}

bool AbortSignal::wait_until(const Deadline& deadline) const {
  std::unique_lock<std::mutex> g(mu_);
  return raised_cv_.wait_until(g, deadline.when(), [this] { return raised_.load(std::memory_order_relaxed); });
}

void AbortSignal::on_raise(std::function<void()> fn) { on_raise(nullptr, std::move(fn)); }

void AbortSignal::on_raise(const void* key, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!raised_.load(std::memory_order_relaxed)) {
      for (size_t i = 0; key && i < listeners_.size(); ++i)
        if (listener_keys_[i] == key) {
          listeners_[i] = std::move(fn);
          return;
        }
      listeners_.push_back(std::move(fn));
      listener_keys_.push_back(key);
      return;
    }
  }
  fn();
}

}  // namespace actorcc
