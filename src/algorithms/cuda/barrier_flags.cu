// Device barrier on the caller's stream: one CTA, one step, a flag to and from every peer.
// Later work on the stream starts only after every rank has reached its barrier.
#include "algorithms/cuda/launch.hpp"
#include "kernels/primitives.cuh"

namespace actorcc::cuda {
namespace {

__global__ void barrier_kernel(DeviceComm c, int coll) {
  Step st = begin_steps(c);
  if (exchange(c, st, 0, coll)) ++st.s;
  end_steps(c, st);
}

}  // namespace

cudaError_t barrier_flags(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  return launch_kernel(barrier_kernel, 1, 32, t, a.stream, c, a.coll);
}

}  // namespace actorcc::cuda
