// A joiner's first step at a root (bootstrap protocol 3): connect, then read the CHALLENGE an
// actorcc root sends every connection at once. What answers otherwise is named: a listener that
// sends bytes that are not actorcc's, one that stays silent (on the from_address path, where the
// user picks the port and another program may hold it), one that closes without a word.
#pragma once
#include <chrono>
#include <functional>
#include <optional>

#include "actorcc/error.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"
#include "common/abort_signal.hpp"
#include "common/deadline.hpp"

namespace actorcc::bootstrap {

// How long a listener may stay silent, or keep closing connections without a greeting, before
// it counts as not an actorcc root (a root greets within milliseconds of the accept).
inline constexpr std::chrono::milliseconds kGreetingWait(5000);

struct Greeting {
  net::Fd fd;
  wire::Token nonce;  // the root's challenge on this connection
};

struct GreetingRules {
  Deadline connect_by;      // connect_with_retry's deadline (the join deadline)
  Deadline answer_by;       // the root must have answered by then (the join deadline plus grace)
  bool silence_is_foreign;  // a listener silent for kGreetingWait is not an actorcc root
  std::optional<std::chrono::milliseconds> refused_for;  // see net::connect_with_retry
  // Called (and expected to throw) when `refused_for` ran out: nothing listens any more.
  std::function<void(const Error&)> on_gone;
};

// Connects to `root` and reads its CHALLENGE. nullopt: `answer_by` passed with no greeting (the
// caller says the root did not answer). Throws RemoteError (culprit -1) naming what answered when
// it is not an actorcc root of this version, TimeoutError (culprit -1) for a silent listener
// under `silence_is_foreign`, and rethrows `abort`.
std::optional<Greeting> greet(const net::SockAddr& root, const GreetingRules& rules, const AbortSignal* abort,
                              int rank);

}  // namespace actorcc::bootstrap
