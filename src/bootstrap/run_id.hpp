// The launch a process belongs to, as its launcher names it: an identity two independent launches
// never share, which the from_address path compares on every join (docs/reliability.md, "Two
// launches on one address"). Two jobs that use the same host, port and world (and the same
// secret, or none) are otherwise indistinguishable to the protocol.
#pragma once
#include <string>

namespace actorcc::bootstrap {

struct RunId {
  std::string value;   // "" = this process has none
  std::string source;  // the variable it came from
  bool operator==(const RunId& o) const { return value == o.value; }
};

// ACTORCC_RUN_ID, else the launcher's: TORCHELASTIC_RUN_ID (torchrun; its default "none" is no
// id), SLURM_JOB_ID. Empty when none is set.
RunId launcher_run_id();

// "run 'X' (from SLURM_JOB_ID)", or "no run id (none of ACTORCC_RUN_ID, ... is set)".
std::string describe(const RunId& id);

}  // namespace actorcc::bootstrap
