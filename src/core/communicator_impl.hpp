// Communicator::Impl: what a communicator holds (its bootstrap, group, backend) and the checks
// every call makes before it reaches the backend. Private to src/core: communicator.cpp runs the
// calls, build.cpp forms the group, suspend.cpp releases and remakes the backend's memory.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <unistd.h>

#include "actorcc/communicator.hpp"
#include "backends/backend.hpp"
#include "bootstrap/bootstrap.hpp"
#include "common/abort_signal.hpp"
#include "common/fork_generation.hpp"
#include "core/departures.hpp"
#include "core/elastic.hpp"
#include "group/group_context.hpp"

namespace actorcc {

struct Communicator::Impl {
  std::shared_ptr<AbortSignal> abort;
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<elastic::Member> member;  // this rank's successor reservation (core/elastic.hpp)
  GroupContext ctx;
  std::unique_ptr<BackendImpl> backend;
  Departures departures;  // the ranks that closed their communicator, and this rank's count
  // The process that built this communicator. A fork() child inherits the object, the
  // sockets and the shm mappings, but not the threads that serve them; the connections are
  // the parent's: a byte the child sends, or a socket it shuts down, is the parent's rank
  // speaking (a peer would take the child's all_reduce for the parent's and return wrong
  // data, or read the child's goodbye as the parent leaving). So the child may not use it,
  // and its teardown leaves everything to the parent (NCCL: comms are unusable after fork).
  const pid_t creator = ::getpid();
  const uint32_t generation = fork_generation();  // what in_creator() compares, per call
  // Communicator::suspend: set and cleared on every rank together (after the same verdicts).
  std::atomic<bool> suspended{false};

  ~Impl();

  bool in_creator() const noexcept { return fork_generation() == generation; }
  void check_process() const;
  void check_usable() const {
    check_process();
    abort->throw_if_raised();
    refuse_if_suspended();
  }
  // A call while suspended has no memory to run in. Refused on this rank alone, without an
  // abort: every rank of a suspended group is suspended (suspend() is collective), so no peer
  // waits inside the call, and the group goes on after resume().
  void refuse_if_suspended() const;

  // The options of a group made from this one (shrink, grow): the same backend kind and device.
  Options next_options(std::chrono::milliseconds join_timeout) const;

  // The end of a shrink, once the new group has formed (so no survivor is still in a call of
  // this one): this group's later calls fail with `why`. `tell_group` (the new group's rank 0):
  // also through the root, if it is still there, so that excluded ranks still alive learn it.
  void revoke(const std::string& why, bool tell_group);

  // A group of one has nobody waiting in the call, so it stays usable; otherwise the others'
  // call sequence has diverged from this rank's, and only an abort ends their wait in bounded
  // time with the real cause (rather than a timeout that names this rank without the reason).
  [[noreturn]] void refuse(const InvalidArgument& e);

  // Every InvalidArgument of a call is refused: the core's checks, checked mode's mismatch and
  // the backend's own (the CUDA backend checks where memory lives).
  void run(const CollArgs& a);
};

}  // namespace actorcc
