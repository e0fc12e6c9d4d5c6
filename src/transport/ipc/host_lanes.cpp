#include "transport/ipc/host_lanes.hpp"

#include <cuda_runtime.h>
#include <unistd.h>

#include "bootstrap/outcomes.hpp"
#include "actorcc/error.hpp"
#include "common/log.hpp"

namespace actorcc::ipc {
namespace {

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw CudaError(std::string(what) + ": " + cudaGetErrorString(e));
  }
}

}  // namespace

HostLanes::~HostLanes() {
  if (registered_) cudaHostUnregister(seg_.data());
}

std::unique_ptr<HostLanes> HostLanes::create(GroupContext& ctx, size_t outbox_bytes) {
  const Deadline dl = Deadline::after(ctx.options.join_timeout);
  const size_t total = outbox_bytes * static_cast<size_t>(ctx.world);
  const bool creator = ctx.local_index == 0;
  ShmSegment seg;
  std::string err, name;
  if (creator) {
    try {
      // The group tag (unique per group) and the pid: no other group or earlier run collides.
      name = "/actorcc-" + ctx.group_tag + "-lanes-p" + std::to_string(::getpid());
      seg = ShmSegment::create(name, total);
    } catch (const std::exception& e) {
      err = Outcomes::reason(e);
    }
  }
  const auto announced = Outcomes::gather_result(*ctx.bootstrap, err, name, dl);
  const int first = ctx.local_ranks.at(0);
  if (announced.status(first) != "ok") {
    LOG_INFO("rank " << ctx.rank << ": no host lanes (rank " << first << " could not create them: "
                     << announced.text(first) << ")");
    return nullptr;
  }
  std::unique_ptr<HostLanes> lanes;
  err.clear();
  try {
    if (!creator) seg = ShmSegment::open(announced.text(first), total, dl);
    lanes.reset(new HostLanes(std::move(seg), outbox_bytes));
    ck(cudaHostRegister(lanes->seg_.data(), total, cudaHostRegisterMapped | cudaHostRegisterPortable),
       "cudaHostRegister of the host lanes");
    lanes->registered_ = true;
    void* dev = nullptr;
    ck(cudaHostGetDevicePointer(&dev, lanes->seg_.data(), 0), "cudaHostGetDevicePointer of the host lanes");
    lanes->device_ = static_cast<char*>(dev);
  } catch (const std::exception& e) {
    err = Outcomes::reason(e);
  }
  const auto mapped = Outcomes::gather_error(*ctx.bootstrap, err, dl);
  // Every rank has it mapped or has given up on it: the name can go (the creator's segment
  // would also remove it when destroyed).
  if (lanes) lanes->seg_.unlink();
  if (!mapped.all_ok()) {
    LOG_INFO("rank " << ctx.rank << ": no host lanes (" << mapped.reasons() << ")");
    return nullptr;
  }
  return lanes;
}

}  // namespace actorcc::ipc
