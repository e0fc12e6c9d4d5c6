// The kernels a group's first small all-reduce will launch, loaded on a thread of its own when
// the group is made (ACTORCC_CUDA_PRELOAD). CUDA loads a kernel, and the module holding it, at
// the kernel's first launch: in a fresh process that is milliseconds inside the group's first
// call, which every rank then waits for. Made at the end of the CUDA backend's setup, the load
// runs while the caller goes on (its tensors; torch's streams and events), and a first call that
// comes sooner simply finds the kernel loading or loaded.
#pragma once
#include <optional>
#include <thread>

#include "algorithms/cuda/launch.hpp"
#include "algorithms/cuda/planner.hpp"

namespace actorcc::cuda {

class KernelPreload {
 public:
  // `launch`: the backend's route table (Route order). `dc` and `tune` are the group's, as its
  // calls will see them; copied, so the thread reads nothing of the backend's.
  KernelPreload(int device, const Launch* launch, const DeviceComm& dc, const Tuning& tune,
                std::optional<Route> forced, int world);
  ~KernelPreload();  // joins: the loads take milliseconds and touch no peer
  KernelPreload(const KernelPreload&) = delete;
  KernelPreload& operator=(const KernelPreload&) = delete;

 private:
  std::thread thread_;
};

}  // namespace actorcc::cuda
