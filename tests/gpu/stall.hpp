// The stall experiment (stall.cu, --stall-test, 2+ ranks): rank 1 delays its stream by
// 0 / 300 / 1000 / 3000 us before 5 replays of a 20-call graph and 20 eager calls, per size and
// variant (lines "STALL ..." on rank 0); and the host abort-word read storm against 1024 LL
// polls ("MICRO ..."). An experiment: it prints times, it does not fail.
#pragma once
#include "worker.hpp"

namespace gw {

void stall_experiment();

}  // namespace gw
