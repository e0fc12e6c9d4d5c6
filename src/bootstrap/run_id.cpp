#include "bootstrap/run_id.hpp"

#include "common/env.hpp"

namespace actorcc::bootstrap {

RunId launcher_run_id() {
  // setting: ACTORCC_RUN_ID - the launch a from_address rank belongs to, the same on every rank of one launch and different between launches; a joiner of another run is refused (default: TORCHELASTIC_RUN_ID, else SLURM_JOB_ID, else none)
  if (auto v = env::get("ACTORCC_RUN_ID")) return {*v, "ACTORCC_RUN_ID"};
  // torchrun without --rdzv-id (or --standalone) sets "none" in every launch: no identity.
  if (auto v = env::get("TORCHELASTIC_RUN_ID"); v && *v != "none") return {*v, "TORCHELASTIC_RUN_ID"};
  // The job, not the step: the ranks of one group may come from several steps of one job (a Ray
  // cluster started by one srun per node, whose actors inherit their raylet's step).
  if (auto v = env::get("SLURM_JOB_ID")) return {*v, "SLURM_JOB_ID"};
  return {};
}

std::string describe(const RunId& id) {
  if (id.value.empty()) return "no run id (none of ACTORCC_RUN_ID, TORCHELASTIC_RUN_ID, SLURM_JOB_ID is set)";
  return "run '" + id.value + "' (from " + id.source + ")";
}

}  // namespace actorcc::bootstrap
