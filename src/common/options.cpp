#include <chrono>
#include <cmath>
#include <string>

#include "actorcc/error.hpp"
#include "actorcc/options.hpp"
#include "common/env.hpp"

namespace actorcc {

std::chrono::milliseconds timeout_from_seconds(double s, const char* what) {
  using std::chrono::milliseconds;
  if (std::isnan(s) || s <= 0)
    throw InvalidArgument(std::string(what) + " must be > 0 seconds (or inf for no limit), got " + std::to_string(s));
  double ms = std::round(s * 1000.0);
  if (ms < 1) return milliseconds(1);
  if (ms >= static_cast<double>(milliseconds::max().count())) return milliseconds::max();  // inf too
  return milliseconds(static_cast<milliseconds::rep>(ms));
}

// A variable only replaces a field the caller left at its default: explicit options win.
Options options_from_env(Options o) {
  using std::chrono::milliseconds;
  const Options d;
  // setting: ACTORCC_JOIN_TIMEOUT_S - seconds ranks may take to join (default 600; inf = no limit)
  if (auto v = env::get_double("ACTORCC_JOIN_TIMEOUT_S"); v && o.join_timeout == d.join_timeout) o.join_timeout = timeout_from_seconds(*v, "ACTORCC_JOIN_TIMEOUT_S");
  // setting: ACTORCC_TIMEOUT_S - bound on every wait inside a collective (default 300; inf = no limit)
  if (auto v = env::get_double("ACTORCC_TIMEOUT_S"); v && o.timeout == d.timeout) o.timeout = timeout_from_seconds(*v, "ACTORCC_TIMEOUT_S");
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
