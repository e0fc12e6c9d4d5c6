// reduce to a root by pushes: the one-shot push all-reduce's kernel (oneshot_push.cu) with a
// root, so only the root receives the peers' copies and folds them (in rank order, as the
// all-reduce does: the root's result is bitwise the all-reduce's).
#include "algorithms/cuda/launch.hpp"

namespace actorcc::cuda {

cudaError_t reduce_push(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  return launch_push_reduce(c, t, a, a.root);
}

}  // namespace actorcc::cuda
