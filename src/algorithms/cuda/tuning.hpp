// The CUDA backend's settings: every knob the planner, the kernels and the workspace read, agreed
// by all ranks at setup (rank 0's values win; backends/cuda/cuda_settings.cpp). One table
// generates the fields and their defaults, the ACTORCC_CUDA_* reads, the cross-rank encoding and
// the rows of docs/settings.md (a unit test keeps that file in step). Plain host data, so the
// planner and its unit tests need no CUDA headers. Why each default is what it is:
// docs/perf/planner.md.
#pragma once
#include <cstddef>
#include <cstdint>

namespace actorcc::cuda {

// Upper bound of the CTA-count settings: the kernels' per-CTA counters and flag rows
// (kMaxBlocks in kernels/device_comm.cuh; the CUDA backend asserts they are equal).
constexpr size_t kMaxCtaSetting = 1024;

// X(field, type, ACTORCC_CUDA_<env>, default, lo, hi, step, bool?, documented default, what it changes)
// A numeric variable replaces the default when it is > 0 (>= 0 where lo is 0: 0 then means
// something), then is clamped to [lo, hi] and rounded down to a multiple of step; a boolean one
// is 1/0, true/false, yes/no, on/off.
#define ACTORCC_CUDA_SETTINGS(X)                                                                              \
  X(threads, int, THREADS, 512, 1, 512, 1, false, "512", "threads per CTA of the data kernels")              \
  X(ll_threads, int, LL_THREADS, 512, 1, 512, 1, false, "512", "threads per CTA of the LL one-shot")         \
  X(min_tile, size_t, MIN_TILE, 16384, 1, SIZE_MAX, 1, false, "16384",                                       \
    "smallest per-CTA tile in bytes before using fewer CTAs")                                                \
  X(push_min_chunk, size_t, PUSH_CHUNK, 8192, 1, SIZE_MAX, 1, false, "8192",                                 \
    "smallest per-CTA slice in bytes of the one-shot push")                                                  \
  X(ll_max, size_t, LL_MAX, 64 << 10, 1, SIZE_MAX, 1, false, "64 KiB",                                       \
    "all-reduce bytes (2 ranks; x 2/world beyond) up to which the LL one-shot is used")                      \
  X(push_max, size_t, PUSH_MAX, 4 << 20, 1, SIZE_MAX, 1, false, "4 MiB",                                     \
    "all-reduce bytes (2 ranks; x 2/world beyond) up to which the one-shot push is used")                    \
  X(pdl, int, PDL, 1, 0, 1, 1, true, "1", "0 disables programmatic dependent launch of the kernels")         \
  X(pipe_tile, size_t, PIPE_TILE, 128 << 10, 1, SIZE_MAX, 1, false, "128 KiB",                               \
    "largest per-CTA tile in bytes of the pipelined two-shot")                                               \
  X(pipe_min, size_t, PIPE_MIN, 4 << 20, 1, SIZE_MAX, 1, false, "4 MiB",                                     \
    "all-reduce bytes from which the pipelined two-shot is used instead of the two-shot")                    \
  X(ll128_max, size_t, LL128_MAX, 64 << 20, 1, SIZE_MAX, 1, false, "64 MiB",                                 \
    "all-reduce bytes (2 ranks; x 2/world beyond) up to which the LL128 one-shot is used")                   \
  X(ll128_min_groups, size_t, LL128_MIN_GROUPS, 4, 1, SIZE_MAX, 1, false, "4",                               \
    "fewest 4-line groups per CTA of the LL128 routes")                                                      \
  X(ll128_busy_groups, size_t, LL128_BUSY_GROUPS, 32, 1, SIZE_MAX, 1, false, "32",                           \
    "fewest groups per CTA of the LL128 routes while one CTA per SM remains")                                \
  X(reg_pipe_min, size_t, REG_PIPE_MIN, 32 << 20, 1, SIZE_MAX, 1, false, "32 MiB",                           \
    "all-reduce bytes from which registered outputs take the pipelined two-shot")                            \
  X(ll128_threads, int, LL128_THREADS, 256, 32, 512, 32, false, "256", "threads per CTA of the LL128 routes") \
  X(ll128_twoshot_min, size_t, LL128_TWOSHOT_MIN, 512 << 10, 1, SIZE_MAX, 1, false, "512 KiB",               \
    "all-reduce bytes (4 ranks; scaled for other worlds above 2) from which the LL128 two-shot is used")     \
  X(ll128_twoshot_max, size_t, LL128_TWOSHOT_MAX, 64 << 20, 1, SIZE_MAX, 1, false, "64 MiB",                 \
    "all-reduce bytes (more than 2 ranks) up to which the LL128 two-shot is used")                           \
  X(ll128_rsag_max, size_t, LL128_RSAG_MAX, SIZE_MAX, 1, SIZE_MAX, 1, false, "all",                          \
    "reduce_scatter / all_gather bytes (full buffer) up to which LL128 lines are used (1: the push kernels)") \
  X(data_blocks, int, BLOCKS, 0, 1, kMaxCtaSetting, 1, false, "the GPU's SM count",                          \
    "CTAs of the data kernels (the group uses the smallest of every rank's)")                                \
  X(ll_blocks, int, LL_BLOCKS, 128, 1, kMaxCtaSetting, 1, false, "128", "CTAs of the LL one-shot")           \
  X(ll128_blocks, int, LL128_BLOCKS, 0, 1, kMaxCtaSetting, 1, false, "3 x BLOCKS", "CTAs of the LL128 routes") \
  X(ll128_bytes, size_t, LL128_BYTES, 0, 1, SIZE_MAX, 1, false, "24 MiB (2 ranks), 48 MiB (more)",          \
    "size of the LL128 receive region per rank")                                                             \
  X(call_check, int, CALL_CHECK, 1, 0, 1, 1, true, "1",                                                      \
    "0 turns off the kernels' check that every rank runs the same collective (kernels/call_check.hpp), for " \
    "measuring its cost only: ranks that disagree then get wrong data or a timeout")                           \
  X(share_gpu, int, SHARE_GPU, 0, 0, 1, 1, true, "0",                                                        \
    "1: let ranks share a GPU (refused otherwise, and not handed to NCCL, which refuses it too); the GPU "  \
    "time-slices the processes, so every exchange with a rank on the same GPU waits for a switch: for tests " \
    "that run more ranks than there are GPUs")

// The settings each rank reads for itself, never agreed across ranks (same columns): nothing
// another rank does depends on them, and a rank being measured may want its own value.
#define ACTORCC_CUDA_RANK_SETTINGS(X)                                                                        \
  X(abort_poll_us, int, ABORT_POLL_US, 20, 0, 1000000, 1, false, "20",                                      \
    "how often (us) one thread per GPU reads the host abort word inside spinning kernels; 0 = every "      \
    "waiting thread reads it (the old behaviour, which stalled calls by ~1 ms after a skew); each rank "   \
    "uses its own value")

#define ACTORCC_SETTING_FIELD(field, type, env, dflt, lo, hi, step, is_bool, doc_dflt, doc) type field = dflt;
struct Tuning {
  ACTORCC_CUDA_SETTINGS(ACTORCC_SETTING_FIELD)
};
struct RankTuning {
  ACTORCC_CUDA_RANK_SETTINGS(ACTORCC_SETTING_FIELD)
};
#undef ACTORCC_SETTING_FIELD

}  // namespace actorcc::cuda
