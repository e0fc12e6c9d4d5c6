#include "actorcc/error.hpp"

namespace actorcc {

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

Error::Error(ErrorCode code, const std::string& message, int rank)
    : std::runtime_error("actorcc " + std::string(to_string(code)) + " error: " + message), code_(code), rank_(rank) {}

}  // namespace actorcc
