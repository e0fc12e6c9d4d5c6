// The interface every data backend implements (backends/cpu over POSIX shm, backends/cuda over
// VMM-shared GPU memory, backends/nccl); core/ picks one per group. The Communicator validates
// arguments before calling in, so backends may assume valid pointers for count > 0, a supported
// dtype/op and a root in range.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actorcc/error.hpp"
#include "actorcc/types.hpp"
#include "group/group_context.hpp"

namespace actorcc {

class BackendImpl {
 public:
  virtual ~BackendImpl() = default;
  virtual Backend kind() const = 0;
  virtual int device() const { return -1; }
  virtual void run(const CollArgs& args) = 0;
  // Throws the group's error if the backend holds one no call has reported yet (a GPU kernel
  // that gave up, a peer's abort in shared memory). Cheap: no synchronisation.
  virtual void poll_errors() {}
  // Waits until this rank's calls enqueued on `stream` (a cudaStream_t) are done, then as
  // poll_errors(). Host backends run calls synchronously: nothing to wait for.
  virtual void synchronize(void* /*stream*/) { poll_errors(); }
  virtual void register_buffer(void* /*ptr*/, size_t /*bytes*/) {}
  virtual void deregister_buffer(void* /*ptr*/) {}
  // `registered_output`: the call's output lies in a buffer passed to register_buffer.
  virtual std::string plan(Collective c, size_t bytes, bool registered_output) const = 0;
  // Communicator::suspend / resume. The core has waited for every rank's quiesce() before
  // suspend(), so no kernel of the group uses the memory released;
  // both are collective (resume re-exchanges handles over the bootstrap) and throw together on
  // every rank. A backend that cannot release its memory refuses (the same on every rank: the
  // backend is a group decision): can_suspend() false.
  virtual bool can_suspend() const { return false; }
  // Waits until this rank's calls are done (the kernels of every stream), then as poll_errors().
  virtual void quiesce() { poll_errors(); }
  virtual void suspend() {}
  virtual void resume() {}
  // Communicator::mem_stats (`suspended` is filled in by the core).
  virtual MemoryStats memory() const { return {}; }
  // Communicator::setup_ms.
  virtual std::vector<std::pair<std::string, double>> setup_ms() const { return {}; }
};

// Factories; each throws UnsupportedError with the reason when it cannot serve the group.
std::unique_ptr<BackendImpl> make_cpu_backend(GroupContext& ctx);
// CPU groups that span nodes: shm inside a node, TCP rails between (backends/hier).
std::unique_ptr<BackendImpl> make_cpu_hier_backend(GroupContext& ctx);
std::unique_ptr<BackendImpl> make_cuda_backend(GroupContext& ctx);  // only with ACTORCC_WITH_CUDA
// GPU groups that span nodes: the CUDA backend inside each node, NCCL rails between (backends/hier).
std::unique_ptr<BackendImpl> make_gpu_hier_backend(GroupContext& ctx);
// All collectives through NCCL (loaded at run time); `why` is logged. Collective over all ranks.
std::unique_ptr<BackendImpl> make_nccl_backend(GroupContext& ctx, const std::string& why);
bool cuda_usable(int device);  // a device this process can use exists (false without a driver)
// The CUDA ordinal to use: `requested` if >= 0, else the current device; -1 when CUDA is not
// usable here (no driver, no device). Implemented in backends/cuda/cuda_device_cuda.cpp / backends/backend_stubs.cpp.
int cuda_resolve_device(int requested);

}  // namespace actorcc
