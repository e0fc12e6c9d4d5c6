// Entry points of the two roles of the actorcc-bench binary and the exit codes they share.
// The launcher (what a user runs) re-executes the binary with the hidden --worker flag once
// per rank; workers report progress in <run-dir>/rank<R>.status and rank 0 reports results in
// <run-dir>/results.tsv.
#pragma once
#include <string>
#include <vector>

#include "cli.hpp"

namespace actorcc::bench {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,   // a worker failed (its own error), or the run was killed after a hang
  kExitUsage = 2,
  kExitWrong = 3,    // wrong results
  kExitRemote = 4,   // worker: another rank failed (actorcc::RemoteError)
  kExitTimeout = 5,  // worker: a bounded wait expired (actorcc::TimeoutError)
  kExitInterrupted = 130,
};

// The environment variable that carries the group's UniqueId (hex) from the launcher to its
// workers: it is a join token, so it stays off the command line (visible in ps).
inline constexpr const char* kIdEnv = "ACTORCC_BENCH_UNIQUE_ID";

int worker_main(const Config& c);
int launcher_main(Config c, const std::string& self_exe, const std::vector<std::string>& argv);

}  // namespace actorcc::bench
