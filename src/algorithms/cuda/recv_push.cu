// recv: one transfer from a peer.
// The call's transfers (algorithms/p2p_plan.cpp) run on p2p_push.cu's per-pair channels.
#include "algorithms/cuda/launch.hpp"

namespace actorcc::cuda {

cudaError_t recv_push(const DeviceComm& c, const Tuning& t, const CallArgs& a) { return launch_p2p(c, t, a); }

}  // namespace actorcc::cuda
