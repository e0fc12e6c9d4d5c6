// Verdict: every rank's result of one setup step that can throw (a backend's setup, a release of
// memory), all-gathered over Outcomes so that all ranks throw together, with the same text and the
// same culprit, or all go on. A rank that failed alone and threw would leave the others waiting
// in their next step until its timeout.
#pragma once
#include <exception>
#include <memory>
#include <string>

#include "actorcc/error.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/outcomes.hpp"
#include "common/deadline.hpp"

namespace actorcc {

// One rank's attempt at a setup step: empty on success, else why and the error's code.
struct Attempt {
  std::string error;
  ErrorCode code = ErrorCode::Internal;
  int culprit = -1;  // the rank the error names as at fault, when it names one
};

// The attempt a caught exception makes: an Error's reason, code and culprit; any other
// exception's reason as an Internal error naming nobody.
Attempt attempt_of(const std::exception& e);

// Every rank's verdict on a setup step: "\n  rank r: why" for every rank that failed, the first
// of them (the culprit) and its error's code (a full /dev/shm is a System error on that rank
// wherever it is reported). Every rank gets the same verdict (Outcomes), so all ranks take the
// same next step and none waits in a collective alone.
struct Verdict {
  std::string text;
  int culprit = -1;
  ErrorCode code = ErrorCode::Unsupported;
  bool ok() const { return text.empty(); }
  [[noreturn]] void raise(const std::string& what, int rank) const { throw Error(code, what + text, rank, culprit); }
};

// Collective: every rank of `bs` calls it with its own attempt, in the same order.
Verdict failed_ranks(Bootstrap& bs, Deadline dl, const Attempt& mine);

// Makes `out` with `make()`, returning the attempt (`out` is empty when it failed), for
// failed_ranks() to gather.
template <typename T, typename Make>
Attempt try_make(Bootstrap& bs, std::unique_ptr<T>& out, Make&& make) {
  try {
    out = make();
    return {};
  } catch (const TimeoutError& e) {
    // A setup step timed out: some rank never arrived (stopped, or stuck), so gathering the
    // outcomes would only time out again. The first rank to time out knows who is missing; a
    // later one would also list the ranks that gave up meanwhile. So it ends the group with its
    // cause, and the others' setup waits raise that at once.
    out.reset();
    bs.abort(e.what(), e.culprit());
    throw;
  } catch (const std::exception& e) {
    out.reset();
    return attempt_of(e);
  }
}

}  // namespace actorcc
