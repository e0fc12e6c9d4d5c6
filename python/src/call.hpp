// A collective call of the extension, validated: prepare() resolves every tensor and checks
// every argument (writable output, dtypes, devices, sizes by world_size or per-peer counts)
// before anything moves; Call::run() then makes the C++ call with the GIL released (possibly on
// another thread: the Python layer's CPU worker). PyComm is what the _Communicator class holds.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <vector>

#include "actorcc/actorcc.hpp"
#include "bindings.hpp"
#include "tensor_arg.hpp"

namespace actorcc::py {

// Everything the binding keeps per communicator. The shared mutex lets calls (and abort) run
// concurrently with each other while close() waits for them to finish before destroying.
struct PyComm {
  std::unique_ptr<Communicator> c;
  std::shared_mutex mu;
  // The process that made it. In a fork() child `mu` holds the parent's state: a call that
  // another thread was in when the fork came holds it there forever (that thread does not
  // exist in the child), so close() must not wait for it.
  const pid_t creator = ::getpid();
  // Cached after construction (valid after close too).
  int rank = -1, world = 0, device = -1;
  Backend backend = Backend::Cpu;

  explicit PyComm(std::unique_ptr<Communicator> comm) : c(std::move(comm)) {
    rank = c->rank();
    world = c->world_size();
    device = c->device();
    backend = c->backend();
  }

  Communicator& get() {
    if (!c) throw Error(ErrorCode::InvalidArgument, "communicator is closed", rank);
    return *c;
  }

  // Raises InvalidArgumentError when `b` is on a device this communicator cannot use.
  void check_device(const Buf& b, const char* what) const;
};

// A validated call, ready to run (possibly on another thread: the Python layer's CPU worker).
struct Call {
  nb::object owner;  // the _Communicator (keeps PyComm alive)
  PyComm* pc = nullptr;
  Collective coll = Collective::AllReduce;
  Buf send, recv;
  size_t count = 0;
  RedOp op = RedOp::Sum;
  int root = 0;
  Stream stream = nullptr;
  bool done = false;
  // Send / Recv: the peer (in `root`). SendRecv: the batch, and its tensors kept alive.
  // AllToAllV: the per-peer counts.
  std::vector<P2POp> ops;
  std::vector<Buf> op_bufs;
  std::vector<size_t> in_counts, out_counts;

  void run();
  void run_unlocked();  // run() without the GIL
};

// Resolves and checks every argument; throws InvalidArgument before anything moves.
Call prepare(nb::handle self, int coll_code, nb::handle send_h, nb::handle recv_h, int op_code, int root,
             uintptr_t stream, int dtype_override, nb::handle in_counts = nb::none(), nb::handle out_counts = nb::none());

}  // namespace actorcc::py
