// reduce_scatter: the first phase of the two-shot all-reduce (twoshot.cu) with segments
// of exactly recv_count elements: rank s's output is the fold of segment s of every input.
#include "algorithms/cuda/launch.hpp"

namespace actorcc::cuda {

cudaError_t reduce_scatter_push(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  return launch_rs_ag(c, t, a, a.count * c.world, a.count, false);
}

}  // namespace actorcc::cuda
