// The exception hierarchy every public call may throw. Each error carries a code, the rank
// that raised it and, when known, the rank that caused it (culprit()).
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace actorcc {

enum class ErrorCode : int {
  Internal = 1,
  InvalidArgument = 2,
  Timeout = 3,
  Remote = 4,     // another rank failed, aborted or vanished
  System = 5,     // an OS call failed (socket, shm, ...)
  Cuda = 6,       // a CUDA call failed
  Unsupported = 7,
};

const char* to_string(ErrorCode c) noexcept;

class Error : public std::runtime_error {
 public:
  // `rank` is the rank that observed the error (-1 when not yet known). what() is
  // "actorcc <code> error: rank R: <message>" when rank >= 0, so no call site builds the
  // prefix by hand. A message that already opens with that rank ("rank R: ..." from a
  // rethrown error, or "rank R timed out ..." where the rank is the sentence's subject) is
  // kept as it is: rethrown and wrapped errors carry one prefix, not one per layer.
  //
  // `culprit` is the rank at fault when the observer knows it: the rank a timed-out wait was
  // waiting for (the first, where several were missing: the text lists them all), the rank
  // that died, left, refused a call or disagreed on it. It is that rank even when the news
  // came through a third rank's abort (the text then says who reported it); -1 when unknown
  // (and, for a RemoteError, when the root itself is gone).
  Error(ErrorCode code, const std::string& message, int rank = -1, int culprit = -1);
  ErrorCode code() const noexcept { return code_; }
  int rank() const noexcept { return rank_; }
  int culprit() const noexcept { return culprit_; }
  // Every rank known lost when the error was raised, ascending: the culprit and the ranks whose
  // loss the root reported after it (two ranks killed together: an error raised at the first
  // loss may already list both). A snapshot; the group's later errors may know more. Without
  // such a list: the culprit alone (none when it is -1).
  const std::vector<int>& culprits() const noexcept { return culprits_; }
  // Sets culprits() (sorted, duplicates and negative ranks dropped, the culprit added).
  void set_culprits(std::vector<int> ranks);
  // what() without its "actorcc <code> error: " opening ("rank R: <message>"), for a text that
  // quotes this error inside another.
  std::string message() const;

 private:
  ErrorCode code_;
  int rank_;
  int culprit_;
  std::vector<int> culprits_;
};

// One type per code, so a caller can catch exactly the failures it handles.
template <ErrorCode C>
class CodedError : public Error {
 public:
  explicit CodedError(const std::string& m, int rank = -1, int culprit = -1) : Error(C, m, rank, culprit) {}
};
using InvalidArgument = CodedError<ErrorCode::InvalidArgument>;
using TimeoutError = CodedError<ErrorCode::Timeout>;
using SystemError = CodedError<ErrorCode::System>;
using CudaError = CodedError<ErrorCode::Cuda>;
using UnsupportedError = CodedError<ErrorCode::Unsupported>;

// Another rank failed; culprit() names it (-1 when the root itself is gone).
class RemoteError : public Error {
 public:
  RemoteError(const std::string& m, int culprit, int rank = -1) : Error(ErrorCode::Remote, m, rank, culprit) {}
};

}  // namespace actorcc
