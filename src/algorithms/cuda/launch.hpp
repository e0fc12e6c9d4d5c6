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

#include "actorcc/types.hpp"
#include "algorithms/cuda/p2p_batch.hpp"
#include "algorithms/cuda/routes.hpp"
#include "algorithms/cuda/tuning.hpp"
#include "kernels/device_comm.cuh"

namespace actorcc::cuda {

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
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  int coll = 0;      // actorcc::Collective, recorded with kernel errors
  cudaStream_t stream = nullptr;
  // The pipelined two-shot's call descriptor (kernels/device_comm.cuh [desc]): every rank must
  // compute the same value, or the call fails with kErrMismatch before writing into a peer.
  unsigned long long desc = 0;
  PeerPtrs direct;   // registered output: each peer's recv mapped here (else all nullptr)
  const P2PBatch* batch = nullptr;  // send, recv, send_recv, all_to_all_v: this rank's transfers
};

inline size_t dtype_bytes(DataType dtype) { return dtype_size(dtype); }

// One launch function per route (algorithms/cuda/routes.hpp), cuda::<name> in <name>.cu; the
// LL128 reduce_scatter and all_gather share twoshot_ll128.cu's kernel, and so its file; the
// routes that only forward to another file's kernel (and copy) are the rows of forwarded_routes.cu.
using Launch = cudaError_t (*)(const DeviceComm& c, const Tuning& t, const CallArgs& a);
#define ACTORCC_ROUTE_LAUNCH_DECL(e, name, coll, cond) \
  cudaError_t name(const DeviceComm& c, const Tuning& t, const CallArgs& a);
ACTORCC_CUDA_ROUTES(ACTORCC_ROUTE_LAUNCH_DECL)
#undef ACTORCC_ROUTE_LAUNCH_DECL

// Shared by the one-shot push all-reduce (root -1) and reduce_push (root = a.root), in
// oneshot_push.cu: with a root only the root receives the peers' copies and folds them.
cudaError_t launch_push_reduce(const DeviceComm& c, const Tuning& t, const CallArgs& a, int root);

// Shared by all_to_all_push, gather_push and scatter_push (the kernel is in all_to_all_push.cu):
// byte pushes of per-peer blocks, in one of three shapes.
enum class ExchangeShape : int { AllToAll = 0, Gather = 1, Scatter = 2 };
cudaError_t launch_exchange(const DeviceComm& c, const Tuning& t, const CallArgs& a, ExchangeShape shape);

// Shared by send_push, recv_push, send_recv_push and all_to_all_v_push (p2p_push.cu): a.batch's
// transfers on per-pair channels.
cudaError_t launch_p2p(const DeviceComm& c, const Tuning& t, const CallArgs& a);

// Shared by the two-shot all-reduce and reduce_scatter_push (twoshot.cu): reduce-scatter by
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

// Launches a byte-tile kernel (kernels/byte_tiles.cuh) over the call's whole message, cut by
// plan_byte_tiles: kernel(c, send, recv, nbytes, tile, ntiles, extra..., coll).
template <typename... KArgs, typename... Extra>
cudaError_t launch_byte_tiles(void (*kernel)(KArgs...), const DeviceComm& c, const Tuning& t, const CallArgs& a,
                              Extra... extra) {
  const size_t nbytes = a.count * dtype_bytes(a.dtype);
  const TilePlan p = plan_byte_tiles(nbytes, c, t);
  return launch_kernel(kernel, static_cast<unsigned>(p.blocks), t.threads, t, a.stream, c,
                       static_cast<const char*>(a.send), static_cast<char*>(a.recv), nbytes, p.tile, p.ntiles, extra...,
                       a.coll);
}

}  // namespace actorcc::cuda
