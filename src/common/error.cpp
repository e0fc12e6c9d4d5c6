#include "actorcc/error.hpp"

#include <algorithm>
#include <string_view>

namespace actorcc {
namespace {

// True when `m` opens with "rank <rank>" followed by ':' or ' ' or nothing: the text names the
// observing rank already (a digit after it would be another rank: "rank 12" is not rank 1).
bool opens_with_rank(std::string_view m, int rank) {
  const std::string head = "rank " + std::to_string(rank);
  if (m.substr(0, head.size()) != head) return false;
  return m.size() == head.size() || m[head.size()] == ':' || m[head.size()] == ' ';
}

std::string with_rank(const std::string& message, int rank) {
  if (rank < 0 || opens_with_rank(message, rank)) return message;
  return "rank " + std::to_string(rank) + ": " + message;
}

// "actorcc <code> error: ", what() opens with it (message() is what follows).
std::string opening(ErrorCode code) { return "actorcc " + std::string(to_string(code)) + " error: "; }

}  // namespace

const char* to_string(ErrorCode c) noexcept {
  switch (c) {
    case ErrorCode::Internal: return "internal";
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::Remote: return "remote failure";
    case ErrorCode::System: return "system";
    case ErrorCode::Cuda: return "cuda";
    case ErrorCode::Unsupported: return "unsupported";
  }
  return "unknown";
}

Error::Error(ErrorCode code, const std::string& message, int rank, int culprit)
    : std::runtime_error(opening(code) + with_rank(message, rank)),
      code_(code),
      rank_(rank),
      culprit_(culprit) {
  if (culprit >= 0) culprits_.push_back(culprit);
}

void Error::set_culprits(std::vector<int> ranks) {
  if (culprit_ >= 0) ranks.push_back(culprit_);
  std::erase_if(ranks, [](int r) { return r < 0; });
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  culprits_ = std::move(ranks);
}

std::string Error::message() const {
  return std::string(what()).substr(opening(code_).size());
}

}  // namespace actorcc
