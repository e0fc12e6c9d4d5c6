// The interface every data backend (cpu over POSIX shm, cuda over VMM-shared GPU memory)
// implements. The Communicator validates arguments before calling in, so backends may assume
// valid pointers for count > 0, a supported dtype/op and a root in range.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "actorcc/communicator.hpp"
#include "bootstrap/bootstrap.hpp"
#include "common/abort_signal.hpp"

namespace actorcc {

struct CollArgs {
  Collective coll = Collective::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // all_reduce/broadcast: elements; reduce_scatter: per-rank output; all_gather: per-rank input
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  Stream stream = nullptr;
  // Send / Recv: the other rank. SendRecv: the batch (ops[0..num_ops)).
  int peer = -1;
  const P2POp* ops = nullptr;
  size_t num_ops = 0;
  // AllToAllV: world entries each (count is unused).
  const size_t* send_counts = nullptr;
  const size_t* recv_counts = nullptr;
};

// What a backend is built from: the joined group, its topology and options.
struct GroupContext {
  int rank = 0;
  int world = 1;
  Options options;
  std::vector<PeerInfo> peers;
  int num_nodes = 1;
  std::vector<int> local_ranks;  // global ranks on this rank's node, in rank order
  int local_index = 0;           // this rank's index in local_ranks
  std::string group_tag;         // hex of the token: unique per group, names shm/sockets
  Bootstrap* bootstrap = nullptr;
  std::shared_ptr<AbortSignal> abort;
};

class BackendImpl {
 public:
  virtual ~BackendImpl() = default;
  virtual Backend kind() const = 0;
  virtual int device() const { return -1; }
  virtual void run(const CollArgs& args) = 0;
  virtual void register_buffer(void* /*ptr*/, size_t /*bytes*/) {}
  virtual void deregister_buffer(void* /*ptr*/) {}
  // `registered_output`: the call's output lies in a buffer passed to register_buffer.
  virtual std::string plan(Collective c, size_t bytes, bool registered_output) const = 0;
};

// Factories; each throws UnsupportedError with the reason when it cannot serve the group.
std::unique_ptr<BackendImpl> make_cpu_backend(GroupContext& ctx);
std::unique_ptr<BackendImpl> make_cuda_backend(GroupContext& ctx);  // only with ACTORCC_WITH_CUDA
// All collectives through NCCL (loaded at run time); `why` is logged. Collective over all ranks.
std::unique_ptr<BackendImpl> make_nccl_backend(GroupContext& ctx, const std::string& why);
bool cuda_usable(int device);  // a device this process can use exists (false without a driver)
// The CUDA ordinal to use: `requested` if >= 0, else the current device; -1 when CUDA is not
// usable here (no driver, no device). Implemented in core/cuda_device_cuda.cpp / backend_stubs.cpp.
int cuda_resolve_device(int requested);

}  // namespace actorcc
