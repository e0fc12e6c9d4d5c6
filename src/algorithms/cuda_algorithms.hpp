// Host-side entry points of the CUDA algorithms (one .cu file each). Each launches exactly one
// kernel on `stream` (capturable in a CUDA graph: all step state lives in device memory) and
// returns the launch status. Grids depend only on the call's arguments and the group's agreed
// tuning, so every rank launches the same grid for the same call (see kernels/device_comm.cuh).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/device_comm.cuh"

namespace actorcc::cuda {

// Agreed by all ranks at setup (rank 0's values win).
struct Tuning {
  int threads = 512;            // threads per CTA (data kernels)
  int ll_threads = 512;         // threads per CTA (LL one-shot)
  size_t min_tile = 16384;      // smallest per-CTA tile in bytes before using fewer CTAs
  size_t push_min_chunk = 8192; // smallest per-CTA slice for the one-shot push
  // Planner thresholds, measured on 2 x H200 NV18 (tests/gpu/TUNING.md): LL is the fastest up
  // to 64 KiB, LL128 above up to 64 MiB (buffers it cannot take go to the one-shot push up to
  // push_max, the pipelined two-shot above), the pipelined two-shot beyond. One-shot limits scale by 2/world, and for more than 2 ranks the
  // one-shots stop at push_max * 2/world (see CudaBackend::pick).
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
  // ll128_twoshot_min (4 ranks; scaled for other worlds by CudaBackend) up to
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

// Launches `kernel` on a.stream, with programmatic dependent launch when t.pdl (the kernels
// start with griddepcontrol.wait, so the result is the same either way).
template <typename... KArgs, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KArgs...), unsigned grid, unsigned block, const Tuning& t, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = t.pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

struct CallArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // as in CollArgs
  int dtype = 0;
  int op = 0;
  int root = 0;
  int coll = 0;      // actorcc::Collective, recorded with kernel errors
  cudaStream_t stream = nullptr;
  // The pipelined two-shot's call descriptor (kernels/device_comm.cuh [desc]): every rank must
  // compute the same value, or the call fails with kErrMismatch before writing into a peer.
  unsigned long long desc = 0;
  PeerPtrs direct;   // registered output: each peer's recv mapped here (else all nullptr)
};

size_t dtype_bytes(int dtype);

cudaError_t allreduce_ll(const DeviceComm& c, const Tuning& t, const CallArgs& a);       // cuda_oneshot.cu
cudaError_t allreduce_push(const DeviceComm& c, const Tuning& t, const CallArgs& a);     // cuda_oneshot_push.cu
cudaError_t allreduce_ll128(const DeviceComm& c, const Tuning& t, const CallArgs& a);   // cuda_oneshot_ll128.cu
cudaError_t allreduce_ll128_twoshot(const DeviceComm& c, const Tuning& t, const CallArgs& a);  // cuda_twoshot_ll128.cu
cudaError_t allreduce_twoshot(const DeviceComm& c, const Tuning& t, const CallArgs& a);  // cuda_twoshot.cu
cudaError_t allreduce_twoshot_pipe(const DeviceComm& c, const Tuning& t, const CallArgs& a);  // cuda_twoshot_pipe.cu
cudaError_t reduce_scatter_push(const DeviceComm& c, const Tuning& t, const CallArgs& a);  // cuda_reduce_scatter.cu
cudaError_t allgather_push(const DeviceComm& c, const Tuning& t, const CallArgs& a);     // cuda_allgather.cu
cudaError_t reduce_scatter_ll128(const DeviceComm& c, const Tuning& t, const CallArgs& a);  // cuda_twoshot_ll128.cu
cudaError_t allgather_ll128(const DeviceComm& c, const Tuning& t, const CallArgs& a);       // cuda_twoshot_ll128.cu
cudaError_t broadcast_push(const DeviceComm& c, const Tuning& t, const CallArgs& a);     // cuda_broadcast.cu
cudaError_t barrier_flags(const DeviceComm& c, const Tuning& t, const CallArgs& a);      // cuda_barrier.cu

// Shared by the two-shot all-reduce and reduce_scatter (cuda_twoshot.cu): reduce-scatter by
// pushing each segment to its owner, then (gather) all-gather by pushing the owner's result.
// Segment s = elements [s*seg, min(count, (s+1)*seg)); the owner's result goes to
// out + (gather ? rank*seg : 0).
cudaError_t launch_rs_ag(const DeviceComm& c, const Tuning& t, const CallArgs& a, size_t count, size_t seg, bool gather);

inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
inline size_t round_up(size_t a, size_t b) { return ceil_div(a, b) * b; }

// How the two-shot kernels cut a segment of `seg` elements into tiles: as few rounds as tiles
// of at most `max_tile` elements allow, every CTA the same number of tiles, no tile under the
// tuning's min_tile bytes (all in elements, multiples of the vector width `epv`).
struct TilePlan {
  size_t tile;    // elements per tile
  size_t ntiles;  // tiles in the segment
  size_t blocks;  // CTAs to launch
};
inline TilePlan plan_tiles(size_t seg, size_t esz, size_t max_tile, const Tuning& t, int data_blocks) {
  const size_t epv = 16 / esz;
  const size_t min_tile = std::min(max_tile, round_up(std::max<size_t>(epv, t.min_tile / esz), epv));
  const size_t rounds = std::max<size_t>(1, ceil_div(seg, size_t(data_blocks) * max_tile));
  size_t tile = round_up(ceil_div(seg, rounds * data_blocks), epv);
  tile = std::min(max_tile, std::max(tile, min_tile));
  const size_t ntiles = std::max<size_t>(1, ceil_div(seg, tile));
  return {tile, ntiles, std::min<size_t>(ntiles, data_blocks)};
}

// How the all-gather and broadcast kernels cut a message of `nbytes`: one tile per CTA where it
// fits a slot (16-byte multiples, at least the tuning's min_tile), rounds of slot-sized tiles
// beyond (all in bytes).
inline TilePlan plan_byte_tiles(size_t nbytes, const DeviceComm& c, const Tuning& t) {
  const size_t tile = std::min(round_up(std::max(ceil_div(nbytes, size_t(c.data_blocks)), t.min_tile), 16), c.tile_bytes);
  const size_t ntiles = std::max<size_t>(1, ceil_div(nbytes, tile));
  return {tile, ntiles, std::min<size_t>(ntiles, c.data_blocks)};
}

}  // namespace actorcc::cuda
