// gather by pushes: every rank writes its input into the root's slot for it; the root copies
// each peer's tiles to their block of its output. The kernel is all_to_all_push.cu's, in the gather shape.
#include "algorithms/cuda/launch.hpp"

namespace actorcc::cuda {

cudaError_t gather_push(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  return launch_exchange(c, t, a, ExchangeShape::Gather);
}

}  // namespace actorcc::cuda
