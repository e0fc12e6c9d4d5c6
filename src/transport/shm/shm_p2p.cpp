#include "transport/shm/shm_p2p.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <new>
#include <sstream>
#include <string>
#include <utility>

namespace actorcc {
namespace {

struct ChunkHead {
  uint64_t msg_bytes;  // the whole message's size, for the receiver's match check
  uint64_t offset;     // of this chunk within the message
  uint64_t len;
  uint32_t dtype;
};

// Each writer's words on their own cache line: the receiver writes grant, wanted and consumed
// (grant and wanted only while no sender holds the channel), the grantee posted and the heads.
struct ShmChannel {
  alignas(64) std::atomic<uint64_t> grant{0};  // grant number << 32 | grantee's local index + 1 (0: free)
  std::atomic<uint64_t> wanted{0};             // the grantee may post chunks below this
  alignas(64) std::atomic<uint64_t> posted{0};
  alignas(64) std::atomic<uint64_t> consumed{0};
  alignas(64) ChunkHead head[2]{};
};
constexpr size_t kDataOff = (sizeof(ShmChannel) + 63) / 64 * 64;

constexpr size_t kMinChunk = size_t{16} << 10;
constexpr size_t kPage = 4096;
constexpr int kMaxInbox = 8;  // channels per inbox: enough for 8 senders to stream at once
constexpr uint64_t kGranteeMask = 0xffffffffull;

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

ShmChannel& chan(uint8_t* p) { return *std::launder(reinterpret_cast<ShmChannel*>(p)); }
uint8_t* data(ShmChannel& c, uint64_t chunk, size_t chunk_bytes) {
  return reinterpret_cast<uint8_t*>(&c) + kDataOff + (chunk & 1) * chunk_bytes;
}

// This call's transfers with one peer in one direction, in their order: chunk r of the lane
// is chunk r - ends[k-1] of transfer k, for the first k with r < ends[k].
struct Lane {
  bool send = true;
  int peer = 0;
  std::vector<const ShmTransfer*> xs;
  std::vector<uint64_t> ends;
  uint64_t next = 0;   // chunks posted (send) / consumed (recv)
  uint64_t acked = 0;  // send: chunks the receiver has consumed
  ShmChannel* ch = nullptr;  // the granted channel, while held
  uint64_t grant = 0;        // its grant word when granted
  uint64_t abs0 = 0, rel0 = 0;  // chunk rel0 of the lane is the channel's chunk abs0
  uint64_t wanted = 0;
  uint64_t queue = 0;  // send: the peer's inbox activity when last looked at (inbox_activity)

  uint64_t total() const { return ends.back(); }
  bool done() const { return send ? acked >= total() : next >= total(); }
  // The transfer of lane chunk r, and the chunk's offset in it.
  const ShmTransfer& at(uint64_t r, size_t cb, uint64_t* off) const {
    const size_t k = static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), r) - ends.begin());
    *off = (r - (k ? ends[k - 1] : 0)) * cb;
    return *xs[k];
  }
};

// Changes whenever a chunk is consumed or a grant made in local rank `peer`'s inbox: a sender
// waiting for a grant there is queued behind transfers that still move, not stalled.
uint64_t inbox_activity(ShmGroup& g, int peer) {
  uint64_t sum = 0;
  for (int j = 0; j < g.inbox_slots(); ++j) {
    ShmChannel& c = chan(g.inbox(peer, j));
    sum += c.consumed.load(std::memory_order_relaxed) + (c.grant.load(std::memory_order_relaxed) >> 32);
  }
  return sum;
}

uint64_t chunks_of(const ShmTransfer& x, size_t cb) { return std::max<uint64_t>(1, (x.bytes + cb - 1) / cb); }

std::string list(const std::vector<int>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os.str();
}

// Copies between the transfers to and from this rank itself, paired in order. Their sizes
// must agree (a disagreement is this rank's own: fail before anything else moves).
void self_copies(ShmGroup& g, const std::vector<ShmTransfer>& xfers, const char* what) {
  std::vector<const ShmTransfer*> sends, recvs;
  for (const auto& x : xfers)
    if (x.peer == g.me()) (x.send ? sends : recvs).push_back(&x);
  const int me = g.global_rank(g.me());
  if (sends.size() != recvs.size())
    g.fail(ErrorCode::InvalidArgument, me,
           "rank " + std::to_string(me) + " " + what + ": " + std::to_string(sends.size()) + " send(s) to itself but " +
               std::to_string(recvs.size()) + " recv(s) from itself");
  for (size_t k = 0; k < sends.size(); ++k) {
    if (sends[k]->bytes != recvs[k]->bytes || sends[k]->dtype != recvs[k]->dtype)
      g.fail(ErrorCode::InvalidArgument, me,
             "rank " + std::to_string(me) + " " + what + ": send to itself of " + std::to_string(sends[k]->bytes) +
                 " bytes of " + std::string(to_string(sends[k]->dtype)) + " but recv from itself of " +
                 std::to_string(recvs[k]->bytes) + " bytes of " + std::string(to_string(recvs[k]->dtype)));
    if (sends[k]->bytes) std::memmove(recvs[k]->buf, sends[k]->buf, sends[k]->bytes);
  }
}

}  // namespace

int shm_inbox_slots(int n) { return std::clamp(n - 1, 1, kMaxInbox); }

size_t shm_p2p_chunk_bytes(size_t buffer_bytes, int n) {
  // Two chunks per inbox channel: the inboxes together take about half what the slots take.
  return std::max(kMinChunk, round_up(buffer_bytes / (2 * static_cast<size_t>(shm_inbox_slots(n))), kPage));
}

size_t shm_channel_bytes(size_t chunk_bytes) { return round_up(kDataOff + 2 * chunk_bytes, kPage); }

void shm_init_channel(uint8_t* channel) { new (channel) ShmChannel{}; }

namespace {

[[noreturn]] void mismatch(ShmGroup& g, const ShmTransfer& x, const ChunkHead& h, const char* what) {
  const int me_rank = g.global_rank(g.me()), peer = g.global_rank(x.peer);
  const auto dt = static_cast<DataType>(h.dtype);
  const size_t es = dtype_size(x.dtype), pes = dtype_size(dt);
  std::ostringstream os;
  os << "rank " << me_rank << " " << what << ": mismatched point-to-point transfer from rank " << peer << ": rank "
     << me_rank << " expects " << (es ? x.bytes / es : 0) << " " << to_string(x.dtype) << " element(s) (" << x.bytes
     << " bytes) but rank " << peer << " sent " << (pes ? h.msg_bytes / pes : 0) << " " << to_string(dt)
     << " element(s) (" << h.msg_bytes << " bytes)";
  // The culprit is the rank that found the disagreement: the others' errors name it.
  g.fail(ErrorCode::InvalidArgument, me_rank, os.str());
}

// A send lane: finds its grant in the peer's inbox, posts what the grant allows, and counts
// what the receiver consumed (all of it once the grant is revoked: the receiver revokes only
// a drained channel). Returns whether a chunk moved.
bool progress_send(ShmGroup& g, Lane& l, size_t cb) {
  const uint64_t mine = static_cast<uint64_t>(g.me()) + 1;
  if (l.ch && l.ch->grant.load(std::memory_order_seq_cst) != l.grant) {
    l.acked = l.next;
    l.ch = nullptr;
  }
  if (!l.ch && l.next < l.total()) {
    for (int j = 0; j < g.inbox_slots(); ++j) {
      ShmChannel& c = chan(g.inbox(l.peer, j));
      const uint64_t w = c.grant.load(std::memory_order_acquire);  // wanted, and the last grantee's posted
      if ((w & kGranteeMask) != mine) continue;
      l.ch = &c;
      l.grant = w;
      l.wanted = c.wanted.load(std::memory_order_relaxed);
      l.abs0 = c.posted.load(std::memory_order_relaxed);
      l.rel0 = l.next;
      break;
    }
  }
  if (!l.ch) return false;
  ShmChannel& c = *l.ch;
  bool moved = false;
  while (l.next < l.total()) {
    const uint64_t a = l.abs0 + (l.next - l.rel0);
    if (a >= l.wanted || a >= c.consumed.load(std::memory_order_acquire) + 2) break;
    uint64_t off = 0;
    const ShmTransfer& x = l.at(l.next, cb, &off);
    const uint64_t len = std::min<uint64_t>(cb, x.bytes - off);
    if (len) std::memcpy(data(c, a, cb), x.buf + off, len);
    c.head[a & 1] = {x.bytes, off, len, static_cast<uint32_t>(x.dtype)};
    c.posted.store(a + 1, std::memory_order_release);
    ++l.next;
    g.ring(l.peer);
    moved = true;
  }
  // consumed belongs to our grant only if the grant is unchanged after reading it.
  const uint64_t consumed = c.consumed.load(std::memory_order_seq_cst);
  if (c.grant.load(std::memory_order_seq_cst) == l.grant) {
    l.acked = l.rel0 + (consumed - l.abs0);
  } else {
    l.acked = l.next;
    l.ch = nullptr;
  }
  return moved;
}

// A recv lane: grants the peer a free channel of this rank's inbox for the rest of the lane,
// copies chunks out as they are posted (checking each against the recv), and revokes the
// grant once the lane is complete. Returns whether a chunk moved or a grant was made.
bool progress_recv(ShmGroup& g, Lane& l, size_t cb, const char* what) {
  bool moved = false;
  if (!l.ch) {
    for (int j = 0; j < g.inbox_slots(); ++j) {
      ShmChannel& c = chan(g.inbox(g.me(), j));
      const uint64_t w = c.grant.load(std::memory_order_relaxed);  // only this rank writes it
      if ((w & kGranteeMask) != 0) continue;
      l.ch = &c;
      l.abs0 = c.consumed.load(std::memory_order_relaxed);  // == posted: the channel is drained
      l.rel0 = l.next;
      c.wanted.store(l.abs0 + (l.total() - l.next), std::memory_order_relaxed);
      l.grant = ((w >> 32) + 1) << 32 | (static_cast<uint64_t>(l.peer) + 1);
      c.grant.store(l.grant, std::memory_order_seq_cst);  // publishes wanted
      g.ring(l.peer);
      moved = true;
      break;
    }
    if (!l.ch) return false;
  }
  ShmChannel& c = *l.ch;
  while (l.next < l.total()) {
    const uint64_t a = l.abs0 + (l.next - l.rel0);
    if (a >= c.posted.load(std::memory_order_acquire)) break;
    const ChunkHead h = c.head[a & 1];
    uint64_t off = 0;
    const ShmTransfer& x = l.at(l.next, cb, &off);
    if (h.msg_bytes != x.bytes || h.dtype != static_cast<uint32_t>(x.dtype) || h.offset != off) mismatch(g, x, h, what);
    if (h.len) std::memcpy(x.buf + off, data(c, a, cb), h.len);
    c.consumed.store(a + 1, std::memory_order_release);
    ++l.next;
    g.ring(l.peer);
    moved = true;
  }
  if (l.next >= l.total()) {
    c.grant.store(l.grant & ~kGranteeMask, std::memory_order_seq_cst);  // drained: free for the next sender
    l.ch = nullptr;
    g.ring(l.peer);
  }
  return moved;
}

}  // namespace

void shm_transfer(ShmGroup& g, const std::vector<ShmTransfer>& xfers, const char* what) {
  self_copies(g, xfers, what);
  const size_t cb = g.chunk_bytes();
  const int me = g.me();
  const int me_rank = g.global_rank(me);

  // One lane per (peer, direction), its transfers in their order in `xfers`.
  std::map<std::pair<int, bool>, size_t> index;
  std::vector<Lane> lanes;
  for (const auto& x : xfers) {
    if (x.peer == me) continue;
    auto it = index.find({x.peer, x.send});
    if (it == index.end()) {
      it = index.emplace(std::make_pair(x.peer, x.send), lanes.size()).first;
      lanes.emplace_back();
      lanes.back().send = x.send;
      lanes.back().peer = x.peer;
      if (x.send) lanes.back().queue = inbox_activity(g, x.peer);
    }
    Lane& l = lanes[it->second];
    l.xs.push_back(&x);
    l.ends.push_back((l.ends.empty() ? 0 : l.ends.back()) + chunks_of(x, cb));
  }

  Deadline dl = Deadline::after(g.timeout());
  for (;;) {
    const uint32_t seen = g.bell();  // read before scanning: a ring after this wakes the wait below
    bool moved = false, open = false;
    for (Lane& l : lanes) {
      if (l.done()) continue;
      moved |= l.send ? progress_send(g, l, cb) : progress_recv(g, l, cb, what);
      open |= !l.done();
    }
    if (!open) break;
    if (moved) {
      dl = Deadline::after(g.timeout());
      continue;
    }
    if (!g.wait_bell(seen, dl)) {
      // A sender still waiting for a grant while the receiver serves other senders is making
      // progress in the receiver's queue: the timeout counts from that queue's last move.
      bool queued = false;
      for (Lane& l : lanes) {
        if (!l.send || l.ch || l.done()) continue;
        const uint64_t q = inbox_activity(g, l.peer);
        queued |= q != l.queue;
        l.queue = q;
      }
      if (queued) {
        dl = Deadline::after(g.timeout());
        continue;
      }
      std::vector<int> waiting;
      for (const Lane& l : lanes) {
        const int peer = g.global_rank(l.peer);
        if (!l.done() && std::find(waiting.begin(), waiting.end(), peer) == waiting.end()) waiting.push_back(peer);
      }
      std::sort(waiting.begin(), waiting.end());
      g.fail(ErrorCode::Timeout, waiting.empty() ? -1 : waiting.front(),
             "rank " + std::to_string(me_rank) + " timed out after " + std::to_string(g.timeout().count()) + " ms in " +
                 what + " waiting for rank(s) " + list(waiting));
    }
  }
  g.check_abort();  // a peer may have failed the group after our last chunk moved
}

}  // namespace actorcc
