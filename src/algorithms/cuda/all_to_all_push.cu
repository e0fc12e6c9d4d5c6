// all_to_all by pushes; gather_push and scatter_push (forwarded_routes.cu) run the same kernel
// in their shapes.
// On the all-gather's protocol (allgather_push.cu)
// with a block per peer: each step CTA b writes its tile of every block it sends into the
// receiving peer's slot for this rank, flags every peer, waits for every peer's flag and copies
// the tiles it receives from its local slots to their blocks of the output. Every rank flags
// every other rank at every step, also where no data flows between them (gather's non-roots,
// scatter's receivers): that keeps all ranks in the same step, which the slot reuse rule of
// kernels/device_comm.cuh needs. Bytes only (no arithmetic): one kernel for every dtype.
#include "algorithms/cuda/launch.hpp"
#include "kernels/primitives.cuh"

namespace actorcc::cuda {
namespace {

constexpr int kAllToAll = static_cast<int>(ExchangeShape::AllToAll);
constexpr int kGather = static_cast<int>(ExchangeShape::Gather);
constexpr int kScatter = static_cast<int>(ExchangeShape::Scatter);

// nbytes: one block (the per-peer message). Block q of `in` (all_to_all, scatter's root) goes
// to rank q; gather's senders send their whole `in`. Received blocks land at out + q * nbytes
// (all_to_all, gather's root) or at out (scatter's receivers).
__global__ void __launch_bounds__(512) exchange_kernel(DeviceComm c, const char* in, char* out, size_t nbytes,
                                                       size_t tile, size_t ntiles, int shape, int root, int coll) {
  Step st = begin_steps(c);
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const bool vec = aligned16(in) && aligned16(out) && nbytes % 16 == 0;
  const bool is_root = me == root;
  const bool sends_blocks = shape == kAllToAll || (shape == kScatter && is_root);
  const bool gathers = shape == kAllToAll || (shape == kGather && is_root);
  for (size_t t = b; t < ntiles; t += gridDim.x) {
    const int par = static_cast<int>(st.s & 1);
    const size_t lo = t * tile, n = min(tile, nbytes - lo);
    for (int k = 1; k < W; ++k) {
      const int q = peer_after(c, k);
      if (sends_blocks) copy_bytes(data_slot(c, q, par, b, 0, me), in + q * nbytes + lo, n, vec, false);
      else if (shape == kGather && q == root) copy_bytes(data_slot(c, q, par, b, 0, me), in + lo, n, vec, false);
    }
    // This rank's own block (skipped where the caller passed it in place).
    if (shape == kAllToAll) copy_bytes(out + me * nbytes + lo, in + me * nbytes + lo, n, vec, false);
    else if (shape == kGather && is_root && out + me * nbytes != in) copy_bytes(out + me * nbytes + lo, in + lo, n, vec, false);
    else if (shape == kScatter && is_root && in + me * nbytes != out) copy_bytes(out + lo, in + me * nbytes + lo, n, vec, false);
    if (!exchange(c, st, 0, coll)) break;
    if (gathers) {
      for (int k = 1; k < W; ++k) {
        const int q = peer_after(c, k);
        copy_bytes(out + q * nbytes + lo, data_slot(c, me, par, b, 0, q), n, vec, true);
      }
    } else if (shape == kScatter && !is_root) {  // the root's block was copied locally above
      copy_bytes(out + lo, data_slot(c, me, par, b, 0, root), n, vec, true);
    }
    ++st.s;
    __syncthreads();  // the slots are free again only after every thread has read them
  }
  end_steps(c, st);
}

}  // namespace

cudaError_t launch_exchange(const DeviceComm& c, const Tuning& t, const CallArgs& a, ExchangeShape shape) {
  const size_t nbytes = a.count * dtype_bytes(a.dtype);
  const TilePlan p = plan_byte_tiles(nbytes, c, t);
  return launch_kernel(exchange_kernel, static_cast<unsigned>(p.blocks), t.threads, t, a.stream, c,
                       static_cast<const char*>(a.send), static_cast<char*>(a.recv), nbytes, p.tile, p.ntiles,
                       static_cast<int>(shape), a.root, a.coll);
}

cudaError_t all_to_all_push(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  return launch_exchange(c, t, a, ExchangeShape::AllToAll);
}

}  // namespace actorcc::cuda
