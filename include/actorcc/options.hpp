// Options a Communicator is created with. Every field has a default that is correct without
// any environment variable; ACTORCC_* variables only override defaults (see docs/settings.md).
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

#include "actorcc/types.hpp"

namespace actorcc {

struct Options {
  Backend backend = Backend::Auto;  // Auto: Cuda where a GPU is usable, else Cpu
  // How long ranks may take to arrive (ACTORCC_JOIN_TIMEOUT_S overrides the default).
  std::chrono::milliseconds join_timeout{std::chrono::minutes(10)};
  // Bound on every wait inside a collective or barrier (ACTORCC_TIMEOUT_S).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  int device = -1;        // CUDA device ordinal as this process sees it; -1 = current device
  std::string algo;       // "" = planner's choice; else "oneshot", "twoshot", ... (ACTORCC_ALGO)
  bool checked = false;   // verify that all ranks call the same collective (ACTORCC_CHECKED=1)
  size_t workspace_bytes = 0;  // per-rank shared workspace; 0 = backend default
};

// A timeout given in seconds (Python keywords, ACTORCC_*_TIMEOUT_S) as the milliseconds the
// fields above hold. Infinity means "no timeout" (milliseconds::max(): the waits still check the
// group's abort, so they end when any rank aborts or dies); a positive value below 1 ms rounds
// up to 1 ms rather than down to an instant timeout; others round to the nearest millisecond.
// Throws InvalidArgument naming `what` for NaN, zero or a negative value.
std::chrono::milliseconds timeout_from_seconds(double seconds, const char* what);

// Options with the ACTORCC_* environment applied on top of `base` (fields the caller set
// explicitly are kept when the variable is absent).
Options options_from_env(Options base = {});

}  // namespace actorcc
