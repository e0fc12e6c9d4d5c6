// all_to_all_v: a send to and a receive from every rank (counts per peer; its own block a copy).
// The call's transfers (algorithms/p2p_plan.cpp) run on p2p_push.cu's per-pair channels.
#include "algorithms/cuda/launch.hpp"

namespace actorcc::cuda {

cudaError_t all_to_all_v_push(const DeviceComm& c, const Tuning& t, const CallArgs& a) { return launch_p2p(c, t, a); }

}  // namespace actorcc::cuda
