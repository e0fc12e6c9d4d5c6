// gpu_worker's timing table (--bench-only, and after the matrix unless --no-bench): lines
// "TIME comm algo bytes eager_us graph_us busbw" on rank 0 (device.sh tune keeps them). An
// experiment, not a test; the benchmark proper is tools/bench (actorcc-bench).
#pragma once
#include "worker.hpp"

namespace gw {

void timing_table();

}  // namespace gw
