#include "transport/shm/shm_group.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <sstream>

#include "bootstrap/outcomes.hpp"
#include "common/log.hpp"
#include "transport/shm/futex.hpp"
#include "transport/shm/shm_p2p.hpp"

namespace actorcc {

struct ShmGroup::Header {
  uint64_t magic;
  uint32_t version;
  uint32_t nranks;
  uint64_t buffer_bytes;
  uint64_t total_bytes;
  alignas(64) std::atomic<uint32_t> abort_word;  // 0 = none, else culprit + 2 (culprit may be -1)
  std::atomic<uint32_t> abort_claim;             // first raiser wins the right to write the reason
  char abort_reason[480];
};

// Its own cache lines per rank so a rank's bumps never invalidate another rank's word.
struct alignas(64) ShmGroup::Flag {
  std::atomic<uint32_t> step;      // sync points passed (epoch counter, wraps harmlessly)
  std::atomic<uint32_t> sleepers;  // ranks in FUTEX_WAIT on `step`
  std::atomic<uint32_t> left;      // 1 once the rank closed its communicator (clean leave)
  std::atomic<uint32_t> bell;      // doorbell of point-to-point transfers (ShmGroup::ring)
  std::atomic<uint32_t> bell_sleepers;
  // The descriptor of this rank's described call number `seq` (ShmGroup::begin_call), in slot
  // seq % 2: written before the call's first step (seq last, with release), read by peers
  // while they wait for that step or after they saw it.
  struct Described {
    std::atomic<uint64_t> seq, w0, w1;
  } desc[2];
};

namespace {

constexpr uint64_t kMagic = 0x6d68732d63637261ull;  // "arcc-shm"
constexpr uint32_t kVersion = 4;  // 2: point-to-point channels; 3: call descriptors; 4: inboxes
constexpr size_t kPage = 4096;
constexpr size_t kDefaultWorkspace = size_t{4} << 20;  // per rank: two 2 MiB buffers
constexpr size_t kMinBuffer = size_t{32} << 10;
constexpr int kSpins = 256;                             // ~ a few microseconds of pause
constexpr std::chrono::microseconds kSleepSlice{10000};  // futex sleeps re-check every 10 ms
// How long a rank that found a disagreement waits for the local peers that have not begun the
// call yet, to name the rank that differs from the majority (ShmGroup::compare_call).
constexpr std::chrono::milliseconds kVerdictWait{1000};

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

struct Layout {
  size_t flags_off, slots_off, slot_bytes, channels_off, chunk_bytes, channel_bytes, total;
};
Layout layout_for(int n, size_t buffer_bytes) {
  static_assert(sizeof(ShmGroup::Header) <= kPage);
  Layout l{};
  l.flags_off = kPage;
  l.slots_off = l.flags_off + round_up(static_cast<size_t>(n) * sizeof(ShmGroup::Flag), kPage);
  l.slot_bytes = 2 * buffer_bytes;
  l.channels_off = l.slots_off + static_cast<size_t>(n) * l.slot_bytes;
  l.chunk_bytes = shm_p2p_chunk_bytes(buffer_bytes, n);
  l.channel_bytes = shm_channel_bytes(l.chunk_bytes);
  l.total = l.channels_off + static_cast<size_t>(n) * static_cast<size_t>(shm_inbox_slots(n)) * l.channel_bytes;
  return l;
}

// Wrap-safe "counter has reached target" for monotonic 32-bit epochs.
bool reached(uint32_t value, uint32_t target) { return static_cast<int32_t>(value - target) >= 0; }

std::string list(const std::vector<int>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os.str();
}

// Sets the shared abort word (first raiser wins) and wakes every rank sleeping on a step word.
// A free function over the raw mapping so the AbortSignal listener can call it through a
// weak_ptr after the ShmGroup itself is gone.
void publish_abort(void* base, int n, int culprit, const std::string& reason) noexcept {
  auto* h = static_cast<ShmGroup::Header*>(base);
  uint32_t expected = 0;
  if (!h->abort_claim.compare_exchange_strong(expected, 1)) return;
  const size_t len = std::min(reason.size(), sizeof(h->abort_reason) - 1);
  std::memcpy(h->abort_reason, reason.data(), len);
  h->abort_reason[len] = '\0';
  h->abort_word.store(static_cast<uint32_t>(culprit + 2), std::memory_order_seq_cst);
  futex::wake_all(&h->abort_word);
  auto* flags = reinterpret_cast<ShmGroup::Flag*>(static_cast<uint8_t*>(base) + layout_for(n, 0).flags_off);
  for (int p = 0; p < n; ++p) {
    futex::wake_all(&flags[p].step);
    futex::wake_all(&flags[p].bell);
  }
}

}  // namespace

size_t shm_buffer_bytes(size_t workspace_bytes) {
  const size_t ws = workspace_bytes ? workspace_bytes : kDefaultWorkspace;
  return std::max(kMinBuffer, round_up(ws / 2, kPage));
}

std::unique_ptr<ShmGroup> ShmGroup::establish(GroupContext& ctx) {
  const int n = static_cast<int>(ctx.local_ranks.size());
  const int creator = ctx.local_ranks.at(0);
  const bool is_creator = ctx.local_index == 0;
  const Deadline dl = Deadline::after(ctx.options.join_timeout);

  // Step 1: the creator makes the segment and announces its name and size. The name carries
  // the group tag (unique per group), the node and the creator's pid, so no two groups, and no
  // stale segment of an earlier run with the same address, ever collide.
  // Every local rank knows the name (the creator's pid is in the peer table), so if the
  // creator dies before it announces the segment, the survivors can still remove it.
  const std::string planned = "/actorcc-" + ctx.group_tag + "-n" + std::to_string(ctx.peers.at(creator).node) + "-p" +
                              std::to_string(ctx.peers.at(creator).pid);
  ShmSegment seg;
  std::string err, blob;  // the non-creators report success with nothing
  if (is_creator) {
    try {
      // Segments of groups whose every process was killed during setup (nobody left to unlink).
      ShmSegment::remove_orphans("actorcc-");
      const size_t buffer = shm_buffer_bytes(ctx.options.workspace_bytes);
      const Layout l = layout_for(n, buffer);
      const std::string& name = planned;
      seg = ShmSegment::create(name, l.total);
      auto* h = new (seg.data()) Header{};
      h->magic = kMagic;
      h->version = kVersion;
      h->nranks = static_cast<uint32_t>(n);
      h->buffer_bytes = buffer;
      h->total_bytes = l.total;
      for (int p = 0; p < n; ++p)
        new (static_cast<uint8_t*>(seg.data()) + l.flags_off + p * sizeof(Flag)) Flag{};
      for (int p = 0; p < n * shm_inbox_slots(n); ++p)
        shm_init_channel(static_cast<uint8_t*>(seg.data()) + l.channels_off + p * l.channel_bytes);
      // "-" stands for the planner's choice, so the blob always has three fields.
      const std::string algo = ctx.options.algo.empty() ? "-" : ctx.options.algo;
      blob = name + " " + std::to_string(buffer) + " " + algo;
    } catch (const std::exception& e) {
      err = Outcomes::reason(e);
    }
  }
  auto announce = [&] {
    try {
      return Outcomes::gather_result(*ctx.bootstrap, err, blob, dl);
    } catch (...) {  // a rank died or aborted before the name was shared
      ::shm_unlink(planned.c_str());
      throw;
    }
  };
  const auto announced = announce();
  if (announced.status(creator) != "ok")
    throw SystemError("rank " + std::to_string(creator) + " could not create the CPU backend's shared memory: " +
                          announced.text(creator),
                      ctx.rank, creator);
  std::istringstream is(announced.text(creator));
  std::string name, algo;
  size_t buffer = 0;
  is >> name >> buffer >> algo;
  if (algo == "-") algo.clear();
  const Layout l = layout_for(n, buffer);

  // If anything below fails (a peer died, a map failed), whoever notices removes the name, so
  // a creator that died before step 3 leaves nothing in /dev/shm either. Unlinking early is
  // harmless: ranks that mapped the segment keep it.
  try {
    // Step 2: everyone else maps it; all report, so a failure anywhere fails every rank here.
    // The creator made it before announcing it, so a rank that finds it missing fails at once
    // (ShmSegment::open), and with it every rank at this gather, within seconds of the removal.
    std::string map_err;
    if (!is_creator) {
      try {
        seg = ShmSegment::open(name, l.total);
        auto* h = static_cast<Header*>(seg.data());
        if (h->magic != kMagic || h->version != kVersion || h->nranks != static_cast<uint32_t>(n) ||
            h->buffer_bytes != buffer)
          throw SystemError("shared memory segment '" + name + "' has an unexpected header");
      } catch (const std::exception& e) {
        map_err = "local rank " + std::to_string(ctx.local_index) + ": " + Outcomes::reason(e);
      }
    }
    const auto mapped = Outcomes::gather_error(*ctx.bootstrap, map_err, dl);
    if (!mapped.all_ok())
      throw SystemError("rank(s) " + list(mapped.ranks()) + " could not map the CPU backend's shared memory; " +
                            mapped.reasons(),
                        ctx.rank, mapped.ranks().front());

    // Step 3: every local rank has it mapped, so the name can go now: from here on nothing is
    // left in /dev/shm whatever happens to the processes.
    seg.unlink();
  } catch (...) {
    ::shm_unlink(name.c_str());
    throw;
  }
  return std::unique_ptr<ShmGroup>(new ShmGroup(ctx, std::move(seg), buffer, algo));
}

ShmGroup::ShmGroup(GroupContext& ctx, ShmSegment seg, size_t buffer_bytes, std::string algo)
    : ctx_(ctx),
      seg_(std::make_shared<ShmSegment>(std::move(seg))),
      n_(static_cast<int>(ctx.local_ranks.size())),
      me_(ctx.local_index),
      buffer_bytes_(buffer_bytes),
      algo_(std::move(algo)) {
  const Layout l = layout_for(n_, buffer_bytes_);
  auto* base = static_cast<uint8_t*>(seg_->data());
  header_ = reinterpret_cast<Header*>(base);
  flags_ = reinterpret_cast<Flag*>(base + l.flags_off);
  slots_ = base + l.slots_off;
  channels_ = base + l.channels_off;
  chunk_bytes_ = l.chunk_bytes;
  channel_bytes_ = l.channel_bytes;
  inbox_slots_ = shm_inbox_slots(n_);

  // When this rank learns that the group is broken (bootstrap: a peer died or aborted; or a
  // local timeout), tell the local peers through the segment at once. The listener may run
  // after this object is gone (the signal lives as long as the communicator), hence weak_ptr.
  std::weak_ptr<ShmSegment> weak = seg_;
  AbortSignal* signal = ctx.abort.get();
  const int n = n_;
  // Keyed by the context: a group made again over it (suspend, resume) replaces its listener.
  ctx.abort->on_raise(&ctx, [weak, signal, n] {
    if (auto s = weak.lock()) publish_abort(s->data(), n, signal->culprit(), signal->reason());
  });
}

// A clean leave: peers waiting for this rank's next step (now or in a later call) stop at
// once, naming it, instead of waiting for the timeout. Work already completed is unaffected:
// only a wait for a step this rank never reached looks at `left`.
ShmGroup::~ShmGroup() {
  Flag& mine = flags_[me_];
  mine.left.store(1, std::memory_order_seq_cst);
  futex::wake_all(&mine.step);
}

uint8_t* ShmGroup::buffer(int local, uint64_t round) const {
  return slots_ + static_cast<size_t>(local) * 2 * buffer_bytes_ + (round & 1) * buffer_bytes_;
}

void ShmGroup::check_abort() {
  if (ctx_.abort->raised()) ctx_.abort->rethrow();
  const uint32_t w = header_->abort_word.load(std::memory_order_acquire);
  if (w != 0) {
    const int culprit = static_cast<int>(w) - 2;
    std::string reason(header_->abort_reason, strnlen(header_->abort_reason, sizeof(header_->abort_reason)));
    ctx_.abort->raise(culprit, ErrorCode::Remote, reason.empty() ? "rank " + std::to_string(culprit) + " failed" : reason);
    ctx_.abort->rethrow();
  }
}

void ShmGroup::check_settled_abort() {
  // The claimer writes the word a few stores after its claim; only a descheduled (or killed)
  // claimer makes this wait at all, and a killed one ends it at the bound.
  const Deadline dl = Deadline::after(std::chrono::milliseconds(2000));
  while (header_->abort_claim.load(std::memory_order_seq_cst) != 0 &&
         header_->abort_word.load(std::memory_order_acquire) == 0 && !dl.expired())
    futex::wait(&header_->abort_word, 0, std::chrono::microseconds(1000));
  check_abort();
}

// Spins briefly, then sleeps on `word` in slices, until done(value); false at the deadline.
// Sleepers announce themselves on `sleepers`, so wakers skip the syscall when nobody sleeps.
template <typename Done>
bool ShmGroup::wait_on(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleepers, Deadline dl, Done done) {
  // An abort seen while the awaited value is already there belongs to a later call: a rank
  // that found a mismatch in the next call raises the word only after every rank reached this
  // call's steps (it compared with a peer that had passed them), so the step is visible by
  // then, and a call that matched on every rank completes with its data.
  auto abort_unless_done = [&] {
    if (!ctx_.abort->raised() && header_->abort_word.load(std::memory_order_acquire) == 0) return false;
    if (done(word.load(std::memory_order_seq_cst))) return true;
    check_abort();
    return false;
  };
  int spins = 0;
  while (!done(word.load(std::memory_order_acquire))) {
    if (spins < kSpins) {
      ++spins;
      if ((spins & 31) == 0 && abort_unless_done()) return true;
      futex::cpu_relax();
      continue;
    }
    if (abort_unless_done()) return true;
    if (dl.expired()) return false;
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t v = word.load(std::memory_order_seq_cst);
    if (!done(v)) futex::wait(&word, v, kSleepSlice);
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
  return true;
}

// Two ranks whose calls differ would pair the wrong data (or the wrong number of sync points)
// silently. So each call that runs through sync() publishes its descriptor in this rank's flag
// block before its first step, and that first sync compares it with every peer's once the
// peer's step is seen (in the peer's flag block, which the wait reads anyway: no message, no
// extra wait; one more cache line per peer and call).
// Why slot seq % 2 is stable while it is read: a peer rewrites it only when it begins call
// seq + 2, which needs a sync point of call seq + 1, which this rank has not reached yet. And
// the peer's step reaching this rank's target means the peer is in the same call: every earlier
// call matched (else it had failed), so both ranks passed the same number of sync points.
// The first sync also compares while it waits, as soon as the peer has begun the call: a peer
// whose call differs may never come to this sync point (on the hierarchical backend its first
// step may be a network step, waiting for a rank that is itself waiting here).
void ShmGroup::begin_call(const CallDesc& d) {
  uint64_t w[2];
  std::memcpy(w, &d, sizeof w);
  mine_ = d;
  Flag::Described& slot = flags_[me_].desc[++described_ & 1];
  slot.w0.store(w[0], std::memory_order_relaxed);
  slot.w1.store(w[1], std::memory_order_relaxed);
  slot.seq.store(described_, std::memory_order_release);  // the words before it
  compare_next_sync_ = n_ > 1;
}

bool ShmGroup::peer_call(int p, CallDesc* theirs) const {
  const Flag::Described& slot = flags_[p].desc[described_ & 1];
  if (slot.seq.load(std::memory_order_acquire) != described_) return false;  // not begun, or no descriptor
  const uint64_t w[2] = {slot.w0.load(std::memory_order_relaxed), slot.w1.load(std::memory_order_relaxed)};
  std::memcpy(theirs, w, sizeof w);
  return true;
}

void ShmGroup::compare_call(int p) {
  CallDesc theirs;
  if (!peer_call(p, &theirs) || theirs == mine_) return;
  // A group already aborted (a late rank after the others' timeout) reports that cause: the
  // peer's descriptor may be of a call it began after the failure.
  check_settled_abort();
  // The culprit is decided from every local peer's call, not from this pair: every rank that
  // finds the disagreement must name the same rank, the one that differs from the majority
  // (mismatch_verdict), whichever of them claims the abort word first. The peers have begun
  // the call or are about to (each passed the previous call's last sync point with us); one
  // that does not within the bound is left out of the verdict rather than waited for.
  std::vector<std::pair<int, std::string>> calls{{ctx_.rank, mine_.text()}};
  const Deadline dl = Deadline::after(kVerdictWait);
  for (int q = 0; q < n_; ++q) {
    if (q == me_) continue;
    CallDesc d;
    while (!peer_call(q, &d) && flags_[q].left.load(std::memory_order_acquire) == 0 && !dl.expired()) {
      check_abort();  // another rank decided first: its verdict is the group's
      futex::wait(&flags_[q].step, flags_[q].step.load(std::memory_order_acquire), std::chrono::microseconds(200));
    }
    if (peer_call(q, &d)) calls.emplace_back(ctx_.local_ranks[q], d.text());
  }
  const MismatchVerdict v = mismatch_verdict(std::move(calls));
  fail(ErrorCode::InvalidArgument, v.culprit,
       "rank " + std::to_string(ctx_.rank) + ": mismatched collectives: " + v.text + " (call " +
           std::to_string(described_) + " of this communicator's shm collectives)");
}

void ShmGroup::sync(const char* what) {
  const uint32_t target = ++step_;
  const bool compare = compare_next_sync_;
  compare_next_sync_ = false;
  Flag& mine = flags_[me_];
  mine.step.store(target, std::memory_order_seq_cst);
  if (mine.sleepers.load(std::memory_order_seq_cst) != 0) futex::wake_all(&mine.step);
  if (n_ == 1) return;

  const Deadline dl = Deadline::after(ctx_.options.timeout);
  for (int p = 0; p < n_; ++p) {
    if (p == me_) continue;
    Flag& f = flags_[p];
    bool left = false;     // the peer closed its communicator before reaching this step
    bool differs = false;  // the peer has begun another call than this rank's (compare_call fails)
    auto done = [&](uint32_t v) {
      if (reached(v, target)) return true;
      left = f.left.load(std::memory_order_acquire) != 0;
      CallDesc theirs;
      differs = compare && peer_call(p, &theirs) && theirs != mine_;
      return left || differs;
    };
    if (!wait_on(f.step, f.sleepers, dl, done)) throw_timeout(what, target);
    if (left && !reached(f.step.load(std::memory_order_acquire), target)) {
      // A peer that failed raised the abort word before it closed: that names the cause. (Its
      // own raise may have lost the claim to a rank that has not written the word yet: the
      // mismatch test's "rank 1 closed the communicator" where rank 2 made the odd call.)
      check_settled_abort();
      const int who = ctx_.local_ranks[p];
      ctx_.abort->raise(who, ErrorCode::Remote,
                        "rank " + std::to_string(who) + " closed the communicator (in " + what + " on rank " +
                            std::to_string(ctx_.rank) + ")");
      ctx_.abort->rethrow();
    }
    if (compare) compare_call(p);
  }
  // No abort check here: every peer reached this step, so what this call reads next is what
  // they wrote for it. An abort raised meanwhile is of a later call (a faster rank's next call
  // found a mismatch) or of a wait still to come, which sees it; raising it here failed a call
  // that had matched everywhere (the mismatch blamed on the warm-up call before it).
}

uint8_t* ShmGroup::inbox(int dst, int slot) const {
  return channels_ + (static_cast<size_t>(dst) * static_cast<size_t>(inbox_slots_) + static_cast<size_t>(slot)) * channel_bytes_;
}

uint32_t ShmGroup::bell() const { return flags_[me_].bell.load(std::memory_order_seq_cst); }

void ShmGroup::ring(int local) {
  Flag& f = flags_[local];
  f.bell.fetch_add(1, std::memory_order_seq_cst);
  if (f.bell_sleepers.load(std::memory_order_seq_cst) != 0) futex::wake_all(&f.bell);
}

bool ShmGroup::wait_bell(uint32_t seen, Deadline dl) {
  Flag& f = flags_[me_];
  return wait_on(f.bell, f.bell_sleepers, dl, [seen](uint32_t v) { return v != seen; });
}

void ShmGroup::fail(ErrorCode code, int culprit, const std::string& msg) {
  ctx_.abort->raise(culprit, code, msg);
  if (code == ErrorCode::Timeout) throw TimeoutError(msg, ctx_.rank, culprit);
  if (code == ErrorCode::InvalidArgument) throw InvalidArgument(msg, ctx_.rank, culprit);
  throw Error(code, msg, ctx_.rank, culprit);
}

void ShmGroup::throw_timeout(const char* what, uint32_t target) {
  std::vector<int> missing;
  for (int p = 0; p < n_; ++p)
    if (p != me_ && !reached(flags_[p].step.load(std::memory_order_acquire), target))
      missing.push_back(ctx_.local_ranks[p]);
  const std::string msg = "rank " + std::to_string(ctx_.rank) + " timed out after " +
                          std::to_string(ctx_.options.timeout.count()) + " ms in " + what +
                          " waiting for rank(s) " + list(missing);
  // The group cannot continue after a partial collective: poison it for everyone (local
  // peers stop through the abort word, naming the first missing rank) and for later calls.
  const int culprit = missing.empty() ? -1 : missing.front();
  ctx_.abort->raise(culprit, ErrorCode::Timeout, msg);
  throw TimeoutError(msg, ctx_.rank, culprit);
}

}  // namespace actorcc
