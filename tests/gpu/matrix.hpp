// The tier's sweeps (matrix.cu). Every case is one call of cases.hpp; seeds count up from the
// run's base seed, one per case.
#pragma once
#include "worker.hpp"

namespace gw {

// The tier: the planner's choice over every dtype x op x size (1 element to 64 MiB) and every
// collective, then (2+ ranks) each all-reduce route forced, the small-tile pipe and the
// small-slot LL128 groups mixed by the planner, and the registered groups. `quick`: fewer
// graph replays and rounds, no sizes above 8 Mi elements.
void tier_matrix(bool quick, uint64_t& seed);
// Registered outputs: the pipe (16 KiB tiles) storing straight into the peers' outputs, forced
// over every dtype x op, in place, misaligned, graph, back-to-back; then the planner with
// registered buffers mixed with LL / LL128; deregistration; a call whose ranks disagree.
void registered_groups(bool quick, uint64_t& seed);
// The short matrix the test-only mutation build must fail (device.sh mutations): all_reduce of
// float16, bfloat16, float32 with sum, avg, prod at 256 Ki and 1 Mi elements with the tile-
// reduce routes forced (twoshot, twoshot_pipe: the planner would take LL128, which carries no
// mutation), and push reduce_scatter sums.
void mutation_check(uint64_t& seed);
// Every dtype x op of all_reduce and reduce_scatter and every dtype of all_gather and
// broadcast, planner's choice, in passes of growing size (311, 65543, 1 Mi + 5 elements per
// call), in place every 3rd case, misaligned every 2nd; stops between cases once `cap_s`
// seconds have passed (rank 0 decides for all), so a run covers every combination first at the
// smallest size. For 3-8 ranks sharing one GPU (device.sh evidence).
void evidence_matrix(double cap_s, uint64_t& seed);

}  // namespace gw
