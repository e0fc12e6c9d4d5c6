#include <chrono>

#include "actorcc/options.hpp"
#include "common/env.hpp"

namespace actorcc {

// A variable only replaces a field the caller left at its default: explicit options win.
Options options_from_env(Options o) {
  using std::chrono::milliseconds;
  const Options d;
  // setting: ACTORCC_JOIN_TIMEOUT_S - seconds ranks may take to join (default 600)
  if (auto v = env::get_double("ACTORCC_JOIN_TIMEOUT_S"); v && o.join_timeout == d.join_timeout) o.join_timeout = milliseconds(static_cast<int64_t>(*v * 1000));
  // setting: ACTORCC_TIMEOUT_S - bound on every wait inside a collective (default 300)
  if (auto v = env::get_double("ACTORCC_TIMEOUT_S"); v && o.timeout == d.timeout) o.timeout = milliseconds(static_cast<int64_t>(*v * 1000));
  // setting: ACTORCC_BACKEND - auto|cpu|cuda
  if (auto v = env::get("ACTORCC_BACKEND"); v && o.backend == d.backend) o.backend = parse_backend(*v);
  // setting: ACTORCC_ALGO - force an algorithm (oneshot, twoshot, ...)
  if (auto v = env::get("ACTORCC_ALGO"); v && o.algo.empty()) o.algo = *v;
  // setting: ACTORCC_CHECKED - 1 = verify that all ranks call matching collectives
  if (auto v = env::get_bool("ACTORCC_CHECKED"); v && !o.checked) o.checked = *v;
  // setting: ACTORCC_WORKSPACE_BYTES - per-rank shared workspace size
  if (auto v = env::get_int("ACTORCC_WORKSPACE_BYTES"); v && o.workspace_bytes == 0) o.workspace_bytes = static_cast<size_t>(*v);
  return o;
}

}  // namespace actorcc
