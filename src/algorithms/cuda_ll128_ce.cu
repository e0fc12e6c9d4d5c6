// LL128 with a copy-engine share ("ll128_ce", 2 ranks, 8-64 MiB). The SMs run the LL128
// one-shot on the head of the message while each GPU's copy engine pushes the raw tail of its
// input into the peer's [ce] region on a side stream; the LL128 warps fold the tail once it is
// there (cuda_oneshot_ll128.cu, ce_fold_share). Both GPUs pushing with their copy engines and
// their SMs at once moved 369-379 GB/s each way in the probe (tests/gpu/probes/ce_rate.py),
// against ~343 for LL128's lines alone (tests/gpu/TUNING.md row 26).
//
// Per call, on the side stream, forked from the caller's stream after everything before the
// call: ce_claim waits (bounded, abort-aware) until the peer's region is ours to fill, the copy,
// then ce_signal raises the peer's `arrived` and our `sent` (CeFlags, kernels/device_comm.cuh).
// The caller's stream waits for the side stream after the kernel, so a captured graph holds the
// whole call and a synchronized stream has nothing left running. The kernel itself waits for
// `sent` before it writes the tail of the output, so an in-place call never overwrites input
// that our copy engine has not read yet.
#include "algorithms/cuda_algorithms.hpp"
#include "kernels/primitives.cuh"

namespace actorcc::cuda {
namespace {

__global__ void ce_claim(DeviceComm c, int coll) {
  if (threadIdx.x != 0) return;
  CeFlags* f = ce_flags(c, c.rank);
  Spin spin;
  while (ld_acquire_sys(&f->busy) != 0)
    if (spin.expired(c, 1 - c.rank, coll)) return;  // recorded; the next call throws
  st_release_sys(&f->busy, 1ull);
}

__global__ void ce_signal(DeviceComm c) {
  if (threadIdx.x != 0) return;
  __threadfence_system();
  st_release_sys(&ce_flags(c, 1 - c.rank)->arrived, 1ull);
  st_release_sys(&ce_flags(c, c.rank)->sent, 1ull);
}

}  // namespace

CePart plan_ce_part(const DeviceComm& c, const Tuning& t, size_t bytes) {
  CePart ce;
  if (c.world != 2 || c.ce_bytes == 0 || t.ce_percent == 0) return ce;
  const size_t want = std::min(c.ce_bytes, bytes / 100 * t.ce_percent);
  ce.begin = round_up(bytes - want, 4096);  // LL128 keeps whole pages; the tail starts 16-byte aligned
  if (ce.begin == 0 || ce.begin >= bytes) return CePart{};
  ce.len = bytes - ce.begin;
  return ce;
}

cudaError_t allreduce_ll128_ce(const DeviceComm& c, const Tuning& t, const CallArgs& a, const SideStream& side) {
  const size_t bytes = a.count * dtype_bytes(a.dtype);
  const CePart ce = plan_ce_part(c, t, bytes);
  if (ce.len == 0 || !ll128_supports(a.dtype, a.send, a.recv)) return allreduce_ll128(c, t, a);
  cudaError_t e = cudaEventRecord(side.fork, a.stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(side.stream, side.fork, 0);
  if (e == cudaSuccess) {
    ce_claim<<<1, 32, 0, side.stream>>>(c, a.coll);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(c.ws[1 - c.rank] + c.ce_off + kCeFlagBytes, static_cast<const char*>(a.send) + ce.begin, ce.len,
                        cudaMemcpyDeviceToDevice, side.stream);
  if (e == cudaSuccess) {
    ce_signal<<<1, 32, 0, side.stream>>>(c);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaEventRecord(side.join, side.stream);
  if (e == cudaSuccess) e = launch_ll128(c, t, a, ce);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(a.stream, side.join, 0);
  return e;
}

}  // namespace actorcc::cuda
