// scatter by pushes: the root writes block q of its input into rank q's slot for the root;
// every rank copies its block out. The kernel is all_to_all_push.cu's, in the scatter shape.
#include "algorithms/cuda/launch.hpp"

namespace actorcc::cuda {

cudaError_t scatter_push(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  return launch_exchange(c, t, a, ExchangeShape::Scatter);
}

}  // namespace actorcc::cuda
