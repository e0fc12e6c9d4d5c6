#include "common/abort_signal.hpp"

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
  std::lock_guard<std::mutex> g(mu_);
  const std::string& m = reason_;  // Error adds "rank <self>: " (once, if reason_ lacks it)
  switch (code_) {
    case ErrorCode::Timeout: throw TimeoutError(m, self_, culprit_);
    case ErrorCode::Remote: throw RemoteError(m, culprit_, self_);
    case ErrorCode::InvalidArgument: throw InvalidArgument(m, self_, culprit_);
    case ErrorCode::Cuda: throw CudaError(m, self_, culprit_);
    case ErrorCode::System: throw SystemError(m, self_, culprit_);
    default: throw Error(code_, m, self_, culprit_);
  }
}

bool AbortSignal::wait_until(const Deadline& deadline) const {
  std::unique_lock<std::mutex> g(mu_);
  return raised_cv_.wait_until(g, deadline.when(), [this] { return raised_.load(std::memory_order_relaxed); });
}

void AbortSignal::on_raise(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!raised_.load(std::memory_order_relaxed)) {
      listeners_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

}  // namespace actorcc
