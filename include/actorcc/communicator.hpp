// Communicator: one rank of a group. Collectives are enqueued on the caller's CUDA stream
// (CUDA backend) or run synchronously on host buffers (CPU backend). Counts are in elements
// and follow NCCL: reduce_scatter takes the per-rank output count, all_gather the per-rank
// input count. In-place calls pass the same pointer for send and recv (for all_gather and
// reduce_scatter the rank's slice of the full buffer, as in NCCL).
#pragma once
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actorcc/error.hpp"
#include "actorcc/options.hpp"
#include "actorcc/peer_info.hpp"
#include "actorcc/types.hpp"
#include "actorcc/unique_id.hpp"

namespace actorcc {

using Stream = void*;  // a cudaStream_t; nullptr = the legacy default stream

// One point-to-point transfer of a batch (Communicator::send_recv): like one ncclSend or
// ncclRecv between ncclGroupStart and ncclGroupEnd, or one P2POp of torch's batch_isend_irecv.
struct P2POp {
  enum class Kind : uint8_t { Send, Recv };
  Kind kind = Kind::Send;
  void* buf = nullptr;  // read for Send, written for Recv
  size_t count = 0;     // elements
  DataType dtype = DataType::Float32;
  int peer = -1;        // the rank sent to / received from (may be this rank: a local copy)
};

// Communicator::mem_stats().
struct MemoryStats {
  uint64_t suspendable_bytes = 0;  // released by suspend(), made again by resume()
  uint64_t persistent_bytes = 0;   // held until the communicator closes
  bool suspended = false;
  uint64_t total_bytes() const { return suspendable_bytes + persistent_bytes; }
};

class Communicator {
 public:
  // Joins the group described by `id` (see UniqueId::create) as `rank` of `world_size`.
  // Blocks until every rank has joined or options.join_timeout expires (TimeoutError listing
  // the missing ranks).
  Communicator(const UniqueId& id, int rank, int world_size, const Options& options = {});
  // vLLM-style: rank 0 hosts the root on host:port; the others connect to it.
  static std::unique_ptr<Communicator> from_address(const std::string& host, uint16_t port, int rank,
                                                    int world_size, const Options& options = {});
  // Tells the group of `id` that this process will not join it as `rank` of `world_size`, and
  // why (`reason`: a mistake found before joining, such as a bad option, a rank out of range or
  // no usable device), so that every rank's join fails at once with an error naming it, and so
  // does a rank that comes later (until `join_timeout`), instead of waiting out the join timeout.
  // Best effort, within a few seconds, silent where the group's root cannot be reached. The
  // constructor does this for every error it finds before joining; a front end that checks its
  // own arguments first (the Python layer) calls it for those.
  static void refuse_join(const UniqueId& id, int rank, int world_size, const std::string& reason,
                          std::chrono::milliseconds join_timeout = Options{}.join_timeout) noexcept;
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const noexcept;
  int world_size() const noexcept;
  Backend backend() const noexcept;
  int device() const noexcept;  // CUDA ordinal in this process, -1 on the CPU backend
  const std::vector<PeerInfo>& peers() const noexcept;
  int num_nodes() const noexcept;

  void all_reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                  Stream stream = nullptr);
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dtype, RedOp op,
                      Stream stream = nullptr);
  void all_gather(const void* send, void* recv, size_t send_count, DataType dtype,
                  Stream stream = nullptr);
  void broadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                 Stream stream = nullptr);
  void barrier(Stream stream = nullptr);

  // Maps [ptr, ptr+bytes) into every local peer (CUDA backend; a no-op on the CPU backend),
  // so large all-reduces whose output lies in it skip the copy out of the workspace: the
  // all-gather stores straight into each rank's output (2 ranks, from 32 MiB by default).
  // Collective: all ranks register (and deregister) in the same order, and use a registered
  // buffer at the same offset on every rank; a call whose ranks disagree fails with
  // InvalidArgument on every rank before anything is stored into another rank's output.
  // Memory must come from cudaMalloc (legacy IPC handles); other memory is accepted, logged,
  // and served by the workspace path. Deregister (collectively) before freeing the memory, as
  // with NCCL's ncclCommDeregister: a freed and reused address would still count as registered.
  // A CUDA graph captured while a buffer was registered keeps the peers' mapped addresses, so it
  // must not be replayed after the buffer is deregistered.
  void register_buffer(void* ptr, size_t bytes);
  void deregister_buffer(void* ptr);

  // Small-blob all-gather and barrier over the bootstrap network (host side, blocking).
  std::vector<std::string> allgather_bytes(const std::string& blob);
  void host_barrier();

  // Asynchronous errors. A call on the CUDA backend returns once enqueued; if its kernel later
  // gives up (a peer stopped calling and the timeout passed, the group was aborted, ranks
  // disagreed on the call), a watchdog sets this communicator's error within ~0.1 s and aborts
  // the group, and from then on check(), synchronize() and every call throw it (naming the
  // rank at fault). The failed call's output is left incomplete, not poisoned
  // (docs/reliability.md says why), so check before trusting a result that nothing else waited
  // on: check() costs no synchronisation; synchronize(stream) first waits for this rank's calls
  // on `stream`. On the CPU backend calls are synchronous and both only report the group's state.
  void check();
  void synchronize(Stream stream = nullptr);

  // Makes every rank's pending and later calls fail with a RemoteError naming this rank.
  void abort(const std::string& reason = "abort() called");
  bool aborted() const noexcept;

  // Refuses this rank's call with `error` (a bad argument found before anything moved). The
  // other ranks may already be waiting inside the same call, which cannot complete without this
  // rank, so in a group of more than one rank this also aborts the group with `error` as the
  // cause: their pending and later calls raise a RemoteError naming this rank and the reason
  // (docs/reliability.md, "A bad argument on one rank"). Every collective calls it on a failed
  // check; front ends that check arguments themselves (the Python bindings) call it too.
  [[noreturn]] void refuse_call(const InvalidArgument& error);

  // ---- Suspend and resume (NCCL 2.29's ncclCommSuspend / ncclCommResume) ----
  // Releases the memory this communicator's backend can make again: the CUDA backend's VMM
  // workspace (and this process's mappings of every peer's) and its device counters, the CPU
  // backend's shared-memory segment (unmapped; nothing stays in /dev/shm). Collective: every
  // rank calls it with no call of this group in flight on any stream; it waits for this rank's
  // queued kernels, then for every rank (so no kernel still writes into a workspace being
  // freed), then releases. While suspended every call (collective, point-to-point, register,
  // the host all-gather and barrier) throws an UnsupportedError saying the communicator is
  // suspended, at once, without waiting for anyone, and the communicator stays usable: resume()
  // and go on. check() and synchronize() only report the group's error (a peer that died).
  // Suspending twice, or on a backend that cannot (NCCL and the groups across nodes), throws
  // an UnsupportedError on every rank. Bounded by options.join_timeout (a rank that never
  // comes: a TimeoutError naming it).
  void suspend();
  // Makes the released memory again and re-exchanges it with the peers (new VMM handles, a new
  // segment), collectively; the next call runs as on a fresh communicator. Buffers registered
  // before the suspend stay registered (they are the caller's memory, never released). A CUDA
  // graph captured before the suspend holds the old workspace's addresses: capture it again.
  // A rank that is not suspended fails every rank's resume, naming it.
  void resume();
  bool suspended() const noexcept;
  // What the backend holds (ncclCommMemStats): bytes suspend() releases (0 while suspended),
  // bytes it keeps (host-mapped words, the calls' small state), and whether it is suspended.
  // GPU memory on the CUDA backend, the shared segment's bytes on the CPU backend.
  MemoryStats mem_stats() const;

  // Which algorithm the planner would pick for a call of `bytes` (for tools and tests): the
  // message for all_reduce and broadcast, the full buffer (world x count elements) for
  // reduce_scatter's input and all_gather's output, as nccl-tests sizes them;
  // `registered_output`: for a call whose output lies in a registered buffer (register_buffer),
  // which large all-reduces route differently.
  std::string plan(Collective c, size_t bytes, bool registered_output = false) const;
  // What the backend's set-up took on this rank, in ms, by step (for tools): GPU groups that
  // span nodes report "rail_setup" and its parts "nccl_init" (ncclCommInitRank) and "connect"
  // (the first calls, which connect NCCL's channels). Empty where nothing is measured.
  std::vector<std::pair<std::string, double>> setup_ms() const;

  // Point-to-point. A send matches the peer's recv of the same count and dtype; messages
  // between two ranks arrive in the order they were sent. send returns once the peer has
  // received everything, so two ranks that each send before they receive must issue both as
  // one send_recv batch (as with NCCL outside a group). A count or dtype that differs from
  // the peer's fails on both ranks with an error naming both; a peer that never posts the
  // matching call makes this rank time out naming it. Both poison the group, as every
  // failed collective does.
  void send(const void* buf, size_t count, DataType dtype, int peer, Stream stream = nullptr);
  void recv(void* buf, size_t count, DataType dtype, int peer, Stream stream = nullptr);
  // Every op of the batch progresses at once, so any pattern of sends and receives completes
  // (a ring, a pairwise exchange). Ops to the same peer in the same direction keep their order.
  void send_recv(const std::vector<P2POp>& ops, Stream stream = nullptr);
  // Rank r's block k (count elements) goes to rank k's block r. send and recv hold world x
  // count elements and must not overlap.
  void all_to_all(const void* send, void* recv, size_t count, DataType dtype, Stream stream = nullptr);
  // Per-peer counts (world_size entries each): rank r sends send_counts[k] elements to rank k,
  // taken from send at offset sum(send_counts[0..k)), and receives recv_counts[k] elements
  // from rank k into recv at offset sum(recv_counts[0..k)). recv_counts[k] on rank r must
  // equal send_counts[r] on rank k (checked: an error naming both ranks).
  void all_to_all_v(const void* send, const std::vector<size_t>& send_counts, void* recv,
                    const std::vector<size_t>& recv_counts, DataType dtype, Stream stream = nullptr);
  // Reduces every rank's send into root's recv (recv is unused, may be null, elsewhere).
  void reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op, int root,
              Stream stream = nullptr);
  // Root's recv (world x send_count elements) receives every rank's send in rank order; recv
  // is unused (may be null) on the other ranks. In place on the root: send = recv + root x count.
  void gather(const void* send, void* recv, size_t send_count, DataType dtype, int root,
              Stream stream = nullptr);
  // Rank r receives block r (recv_count elements) of root's send (world x recv_count);
  // send is unused (may be null) on the other ranks. In place on the root: recv = send + root x count.
  void scatter(const void* send, void* recv, size_t recv_count, DataType dtype, int root,
               Stream stream = nullptr);

  // ---- Elastic membership (docs/elastic.md) ----
  // A new communicator of this group's ranks except `exclude`, renumbered in order (new rank =
  // index among the survivors in old-rank order), on the same kind of backend. Every survivor
  // passes the same list (a different one fails the new group's join on every rank, naming the
  // rank); it works on a healthy group and on one that is aborted because a rank died, and never
  // waits for an excluded rank or for the process hosting this group's root. Once the new group
  // has formed this communicator is revoked: its later calls (and the excluded ranks' calls)
  // raise a RemoteError saying so; close it to free its memory. A failed shrink (a survivor died
  // during it) throws naming that rank in this group's numbering, leaves this communicator
  // revocable, and may be retried with the rank excluded too. `join_timeout` 0: this
  // communicator's. Single use: shrink the communicator it returns for the next failure.
  std::unique_ptr<Communicator> shrink(const std::vector<int>& exclude,
                                       std::chrono::milliseconds join_timeout = std::chrono::milliseconds(0));
  // Makes a single-use id for a grown group whose root this process hosts (on the interface this
  // rank shares with the group); hand it to the newcomers out of band. Not collective.
  UniqueId grow_id() const;
  // A new communicator of `new_world` ranks: every rank of this group (collective over it) plus
  // newcomers that join with Communicator(id, rank, new_world). Ranks that pass no id take the
  // one the others passed (one bootstrap all-gather over this group, which also checks that the
  // ranks agree on the size and their new ranks). `new_rank` -1 keeps this rank's number. This
  // communicator stays usable: close it when the grown one is ready.
  std::unique_ptr<Communicator> grow(int new_world, const std::optional<UniqueId>& id = std::nullopt, int new_rank = -1,
                                     std::chrono::milliseconds join_timeout = std::chrono::milliseconds(0));

  struct Impl;

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

const char* version() noexcept;

// Interrupts every Communicator of this process that is being constructed (joining, or setting
// up its backend): its constructor throws a RemoteError "rank R was interrupted: <reason>"
// (culprit R) at once, and the ranks already in the group are told through the root. For front
// ends that turn a signal into an exception (the Python bindings: Ctrl-C while joining); a call
// in progress is interrupted with Communicator::abort(). Thread-safe; not async-signal-safe.
void interrupt_constructions(const std::string& reason);

}  // namespace actorcc
