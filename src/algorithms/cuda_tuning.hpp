// The CUDA backend's tuning: every knob the planner and the kernels read, agreed by all ranks at
// setup (CudaBackend). Plain host data, so the planner (core/cuda_planner.cpp) and its unit tests
// need no CUDA headers.
#pragma once
#include <cstddef>
#include <cstdint>

namespace actorcc::cuda {

// Agreed by all ranks at setup (rank 0's values win).
struct Tuning {
  int threads = 512;            // threads per CTA (data kernels)
  int ll_threads = 512;         // threads per CTA (LL one-shot)
  size_t min_tile = 16384;      // smallest per-CTA tile in bytes before using fewer CTAs
  size_t push_min_chunk = 8192; // smallest per-CTA slice for the one-shot push
  // Planner thresholds, measured on 2 x H200 NV18 (tests/gpu/TUNING.md): LL is the fastest up
  // to 64 KiB, LL128 above up to 64 MiB (buffers it cannot take go to the one-shot push up to
  // push_max, the pipelined two-shot above), the pipelined two-shot beyond. One-shot limits
  // scale by 2/world, and for more than 2 ranks the one-shots stop at push_max * 2/world
  // (core/cuda_planner.cpp).
  size_t ll_max = 64 << 10;     // LL one-shot up to this many bytes
  size_t push_max = 4 << 20;    // one-shot push up to this many bytes
  int pdl = 1;                  // launch with programmatic dependent launch
  // Pipelined two-shot (cuda_twoshot_pipe.cu): largest tile per CTA step, and the all-reduce
  // size (any world) from which the planner prefers it over the two-shot. Measured on 2 x H200
  // (tests/gpu/TUNING.md): 128 KiB tiles beat 32/64 KiB at every size (fewer flag rounds), and
  // the pipelined two-shot beats the two-shot from 16 MiB up (-6% at 16 MiB, -8% at 64 MiB,
  // -7% at 256 MiB, -6% at 1 GiB) and ties it at 2-4 MiB, where the one-shots win anyway.
  size_t pipe_tile = 128 << 10;
  size_t pipe_min = 4 << 20;
  // LL128 one-shot (cuda_oneshot_ll128.cu): used above ll_max up to ll128_max bytes (2 ranks,
  // scaled by 2/world); the fewest 4-line groups per CTA.
  size_t ll128_max = 64 << 20;
  size_t ll128_min_groups = 4;
  // ... and at least ll128_busy_groups per CTA (4 per warp of 256 threads) where that still
  // leaves one CTA per SM: a warp's first push and last receive are the parts of its chain
  // nothing overlaps, so 1.3-2.7 groups per warp (the 396 CTAs at 2-4 MiB) lost 0.9-1.4 us
  // on one machine and nothing measurable on another (tests/gpu/TUNING.md rows 30-31). 0: off.
  size_t ll128_busy_groups = 32;
  // Registered outputs (2 ranks): all-reduces from reg_pipe_min bytes take the pipelined
  // two-shot, whose all-gather then writes straight into the peers' outputs.
  size_t reg_pipe_min = 32 << 20;
  // Threads per LL128 CTA; with 3 CTAs of 256 per SM (ll128_blocks in DeviceComm) LL128
  // measured 0.6-1 us faster at 1-16 MiB than with one CTA of 512 (TUNING.md row 20).
  int ll128_threads = 256;
  // LL128 two-shot (cuda_twoshot_ll128.cu), more than 2 ranks only: all-reduces of
  // ll128_twoshot_min (4 ranks; scaled for other worlds by the planner) up to
  // ll128_twoshot_max bytes, the LL128 one-shot below, the pipelined two-shot above. Measured on
  // 4 x H200 (TUNING.md rows 32-33): the one-shot faster at 256 KiB, the two-shot from 512 KiB, and
  // faster than the pipe up to 64 MiB (a tie at 256 MiB). With 2 ranks it moves the one-shot's
  // bytes with one more hop: never planned.
  size_t ll128_twoshot_min = 512 << 10;
  size_t ll128_twoshot_max = 64 << 20;
  // reduce_scatter and all_gather (any world) in LL128 lines up to this many bytes of the full
  // buffer (cuda_twoshot_ll128.cu), the fenced push kernels above and for buffers or chunks
  // the lanes cannot take. Every size by default (tests/gpu/TUNING.md row 34).
  size_t ll128_rsag_max = SIZE_MAX;
};

}  // namespace actorcc::cuda
