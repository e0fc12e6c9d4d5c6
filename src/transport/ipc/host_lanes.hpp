// HostLanes: pinned host outboxes shared by the ranks of a node, the host lane of the 2-rank
// LL128 one-shot (algorithms/cuda_oneshot_ll128.cu): each rank writes a share of a large
// all-reduce into its own outbox over its GPU's PCIe link and reads the peer's outbox over the
// same link, beside the NVLink transfer. One POSIX shared-memory segment holds every rank's
// outbox; local rank 0 creates it, every rank maps it, page-locks it for its GPU
// (cudaHostRegister, mapped) and gives the kernels its device address; the name is removed as
// soon as every rank has it mapped.
// The lane only speeds calls up, so a rank that cannot create, map or register the segment
// (a small /dev/shm, a locked-memory limit) is no error: every rank then goes without it (the
// verdict is all-gathered, so all agree) and the log says why.
#pragma once
#include <cstddef>
#include <memory>

#include "core/backend.hpp"
#include "transport/shm/shm_segment.hpp"

namespace actorcc::ipc {

class HostLanes {
 public:
  // Collective over the group's ranks (all on one node), same `outbox_bytes` everywhere;
  // nullptr where any rank failed.
  static std::unique_ptr<HostLanes> create(GroupContext& ctx, size_t outbox_bytes);
  ~HostLanes();
  HostLanes(const HostLanes&) = delete;
  HostLanes& operator=(const HostLanes&) = delete;

  // Rank r's outbox as this process's GPU addresses it.
  char* outbox(int r) const { return device_ + static_cast<size_t>(r) * outbox_bytes_; }

 private:
  HostLanes(ShmSegment seg, size_t outbox_bytes) : seg_(std::move(seg)), outbox_bytes_(outbox_bytes) {}
  ShmSegment seg_;
  size_t outbox_bytes_;
  bool registered_ = false;  // page-locked with cudaHostRegister (undone before the unmap)
  char* device_ = nullptr;
};

}  // namespace actorcc::ipc
