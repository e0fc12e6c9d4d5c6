// ShmGroup: the shared-memory region the ranks of one host use for CPU collectives, and the
// synchronisation on it.
//
// Layout (one segment per host, created by local rank 0, unlinked once every local rank has
// mapped it):
//   [Header, 4 KiB]  magic, sizes, abort word + reason
//   [Flags, 128 B per local rank, 4 KiB aligned]  `step`: how many sync points the rank passed,
//            and the descriptor of its current call (begin_call)
//   [Slots, per local rank: 2 buffers of buffer_bytes each, 4 KiB aligned]
//   [Inboxes, per local rank: a few point-to-point channels its senders are granted
//            (shm_p2p.hpp), so the segment grows as O(local ranks), not as their pairs]
//
// Protocol. Every collective is cut into rounds; round k uses buffer k % 2 of every slot.
// A sync point is an epoch barrier: a rank bumps its own `step` (monotonic, never reset) and
// waits until every other local rank's `step` has reached the same value. Data written before
// the bump (release) is visible to a peer that saw the bump (acquire).
// Why two buffers suffice: a rank overwrites buffer k % 2 in round k+2 only after the first
// sync point of round k+1, which every rank reaches only after finishing all its reads of
// round k. So a round needs just the sync points its own data flow needs (one for all_gather,
// broadcast, reduce_scatter and one-shot all_reduce, two for two-shot all_reduce).
//
// Waiting spins briefly, then sleeps on the peer's `step` word with FUTEX_WAIT (10 ms slices,
// so the loop re-checks abort and deadline even if a wake is missed); 8 processes may share 2
// cores, so nobody busy-spins for long. A waker only issues FUTEX_WAKE when the word has
// sleepers (a per-word counter; both sides use seq_cst so one of them always sees the other).
//
// Abort: the header's abort word (0 = none, else culprit + 2) is set by the first local rank
// whose AbortSignal is raised (or that times out); it then wakes every step word, so peers
// blocked in a collective stop at once with a RemoteError naming the culprit.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actorcc/error.hpp"
#include "common/deadline.hpp"
#include "group/call_desc.hpp"
#include "group/group_context.hpp"
#include "transport/shm/shm_segment.hpp"

namespace actorcc {

class ShmGroup {
 public:
  // Creates (local rank 0) or opens (others) the host's segment, sequenced with bootstrap
  // all-gathers so that every rank of the group throws together, after the same all-gather,
  // if any rank fails. Throws SystemError / TimeoutError / RemoteError.
  static std::unique_ptr<ShmGroup> establish(GroupContext& ctx);
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  int size() const { return n_; }  // local ranks
  int me() const { return me_; }   // this rank's local index
  size_t buffer_bytes() const { return buffer_bytes_; }
  // Options::algo as local rank 0 has it: every rank must pick the same algorithm (they differ
  // in their sync points), even if the ranks' options or environments differ.
  const std::string& algo() const { return algo_; }
  size_t mapped_bytes() const { return seg_->size(); }  // the whole segment, mapped by every local rank

  // Starts the next round; returns its number (same on every rank).
  uint64_t next_round() { return ++round_; }
  // Buffer of `local` rank's slot used in `round`.
  uint8_t* buffer(int local, uint64_t round) const;

  // Starts a collective call that runs through sync() (not point-to-point, not an empty call):
  // its first sync point fails on every rank, naming both calls, if a local peer's call differs.
  void begin_call(const CallDesc& d);

  // Sync point: publishes this rank's progress and waits for every local peer, bounded by
  // the timeout and the abort word. `what` names the collective for errors.
  void sync(const char* what);

  // Throws if this rank's AbortSignal or the shared abort word is raised.
  void check_abort();
  // check_abort(), after waiting (bounded) for an abort another rank has claimed but not yet
  // written: a rank that failed and then closed may have lost the claim to such a rank, so its
  // leave (or a disagreement found now) must not be reported before the group's cause.
  void check_settled_abort();

  // Point-to-point (transport/shm/shm_p2p.hpp). Channel `slot` of local rank dst's inbox.
  uint8_t* inbox(int dst, int slot) const;
  int inbox_slots() const { return inbox_slots_; }
  size_t chunk_bytes() const { return chunk_bytes_; }
  int global_rank(int local) const { return ctx_.local_ranks[local]; }
  std::chrono::milliseconds timeout() const { return ctx_.options.timeout; }
  // Every rank has a doorbell: a counter its peers bump (ring) after changing a channel it
  // uses, so a rank waiting on several channels sleeps on one word. bell() reads this rank's;
  // wait_bell sleeps until it differs from `seen` (false at the deadline), abort-checked.
  uint32_t bell() const;
  void ring(int local);
  bool wait_bell(uint32_t seen, Deadline dl);
  // Poisons the group (local peers stop through the abort word with `msg`, naming `culprit`)
  // and throws `msg` as this rank's error of kind `code`.
  [[noreturn]] void fail(ErrorCode code, int culprit, const std::string& msg);

  struct Header;
  struct Flag;

 private:
  ShmGroup(GroupContext& ctx, ShmSegment seg, size_t buffer_bytes, std::string algo);
  void raise_shared_abort() noexcept;  // from the AbortSignal listener
  [[noreturn]] void throw_timeout(const char* what, uint32_t target);
  void compare_call(int p);  // fails if local peer p's current call differs from ours
  // Local peer p's descriptor of this rank's current call, once p has begun that call.
  bool peer_call(int p, CallDesc* theirs) const;
  template <typename Done>
  bool wait_on(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleepers, Deadline dl, Done done);

  GroupContext& ctx_;
  std::shared_ptr<ShmSegment> seg_;  // shared with the abort listener, which may outlive us
  int n_ = 1;
  int me_ = 0;
  size_t buffer_bytes_ = 0;
  Header* header_ = nullptr;
  Flag* flags_ = nullptr;
  uint8_t* slots_ = nullptr;
  uint8_t* channels_ = nullptr;
  size_t chunk_bytes_ = 0;
  size_t channel_bytes_ = 0;
  int inbox_slots_ = 1;
  uint64_t round_ = 0;
  uint32_t step_ = 0;
  uint64_t described_ = 0;  // calls begun with begin_call
  CallDesc mine_;
  bool compare_next_sync_ = false;
  std::string algo_;
};

// Bytes of each of the two per-rank buffers for a given Options::workspace_bytes (the
// per-rank total; 0 = default 4 MiB).
size_t shm_buffer_bytes(size_t workspace_bytes);

}  // namespace actorcc
