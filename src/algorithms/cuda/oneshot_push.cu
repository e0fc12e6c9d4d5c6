// One-shot all-reduce, push protocol (medium messages). CTA b owns a slice of the message;
// it writes its slice of this rank's input straight from the user buffer into every peer's
// data slot for this rank (16-byte stores over NVLink), fences, raises one flag per peer,
// waits for the peers' flags, then folds the world's copies of its slice in rank order. Per
// byte it moves the same data as LL but at full width (no flag words), for one extra flag
// latency: better than LL once the message is large enough to be bandwidth-bound.
// Reduce to a root (reduce_push, forwarded_routes.cu) is the same kernel with root >= 0: only the root's slots
// receive data and only the root folds (every rank still flags every rank, which keeps all in
// the same step).
#include "algorithms/cuda/launch.hpp"
#include "kernels/tile_reduce.cuh"

namespace actorcc::cuda {
namespace {

template <typename T, typename Op>
__global__ void __launch_bounds__(512) push_allreduce(DeviceComm c, const T* in, T* out, size_t count,
                                                      size_t per_block, size_t chunk, int root, int coll) {
  Step st = begin_steps(c);
  const int b = blockIdx.x, me = c.rank, W = c.world;
  const size_t e0 = b * per_block, e1 = min(count, e0 + per_block);
  const bool vec = aligned16(in) && aligned16(out);
  for (size_t base = e0; base < e1; base += chunk) {
    const size_t n = min(chunk, e1 - base);
    const int par = static_cast<int>(st.s & 1);
    for (int k = 1; k < W; ++k) {
      const int q = peer_after(c, k);
      if (root >= 0 && q != root) continue;
      copy_bytes(data_slot(c, q, par, b, 0, me), reinterpret_cast<const char*>(in + base), n * sizeof(T), vec, false);
    }
    if (!exchange(c, st, 0, coll)) break;
    if (root < 0 || me == root)
      reduce_tile<T, Op>(c, out + base, in + base, data_slot(c, me, par, b, 0, 0), c.tile_bytes, n, vec, false, 0);
    ++st.s;
    __syncthreads();  // the slots are free again only after every thread has read them
  }
  end_steps(c, st);
}

}  // namespace

cudaError_t launch_push_reduce(const DeviceComm& c, const Tuning& t, const CallArgs& a, int root) {
  const size_t esz = dtype_bytes(a.dtype);
  const size_t epv = 16 / esz;
  const size_t max_chunk = c.tile_bytes / esz;
  size_t per_block = round_up(std::max(ceil_div(a.count, c.data_blocks), t.push_min_chunk / esz), epv);
  size_t blocks = ceil_div(a.count, per_block);
  if (blocks > (size_t)c.data_blocks) blocks = c.data_blocks;
  if (blocks < 1) blocks = 1;
  per_block = round_up(ceil_div(a.count, blocks), epv);
  // Balanced rounds: every round of every CTA moves about the same amount.
  const size_t rounds = ceil_div(per_block, max_chunk);
  const size_t chunk = std::min(max_chunk, round_up(ceil_div(per_block, rounds), epv));
  cudaError_t e = cudaSuccess;
  with_dtype_op(a.dtype, a.op, [&]<typename T, typename Op>() {
    e = launch_kernel(push_allreduce<T, Op>, static_cast<unsigned>(blocks),
                      t.threads, t, a.stream, c, static_cast<const T*>(a.send), static_cast<T*>(a.recv), a.count,
                      per_block, chunk, root, a.coll);
  });
  return e;
}

cudaError_t oneshot_push(const DeviceComm& c, const Tuning& t, const CallArgs& a) { return launch_push_reduce(c, t, a, -1); }

}  // namespace actorcc::cuda
