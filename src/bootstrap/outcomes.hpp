// Outcomes: every rank's result of one local step, all-gathered so that every rank sees the same
// verdict and takes the same next step. A rank that failed alone and threw would leave the others
// waiting in their next collective until the timeout; with the verdict shared, all ranks throw
// together and name the ranks that failed and why.
//
// Each rank reports a status word and a text: "ok" with an optional payload (a handle, settings),
// or a failure class of the caller's choosing ("fail", or e.g. "bad" for a caller error and "no"
// for a capability that is missing) with the reason.
#pragma once
#include <exception>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "common/deadline.hpp"

namespace actorcc {

class Outcomes {
 public:
  // Collective: every rank of the bootstrap calls it in the same order.
  static Outcomes gather(Bootstrap& bs, const std::string& status, const std::string& text, Deadline dl);
  // Shorthand for steps that succeed with `payload` or fail: an empty `error` is "ok".
  static Outcomes gather_result(Bootstrap& bs, const std::string& error, const std::string& payload, Deadline dl) {
    return error.empty() ? gather(bs, "ok", payload, dl) : gather(bs, "fail", error, dl);
  }
  static Outcomes gather_error(Bootstrap& bs, const std::string& error, Deadline dl) {
    return gather_result(bs, error, "", dl);
  }
  // The reason a caught exception gives, never empty (an empty reason would read as success).
  static std::string reason(const std::exception& e) {
    const std::string why = e.what();
    return why.empty() ? "unknown error" : why;
  }

  int world() const { return static_cast<int>(status_.size()); }
  bool all_ok() const;
  const std::string& status(int rank) const { return status_.at(rank); }
  const std::string& text(int rank) const { return text_.at(rank); }  // payload or reason
  // The ranks whose status is `status` (every failed rank when empty).
  std::vector<int> ranks(const std::string& status = {}) const;
  // "rank r: why" for those ranks, joined by `sep` (capped at ~2000 characters).
  std::string reasons(const std::string& status = {}, const std::string& sep = "; ") const;

 private:
  std::vector<std::string> status_, text_;
};

}  // namespace actorcc
