#include "transport/shm/shm_p2p.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <new>
#include <sstream>
#include <string>

namespace actorcc {
namespace {

struct ChunkHead {
  uint64_t msg_bytes;  // the whole message's size, for the receiver's match check
  uint64_t offset;     // of this chunk within the message
  uint64_t len;
  uint32_t dtype;
};

// Each counter on its own cache line: src and dst each write only their own.
struct ShmChannel {
  alignas(64) std::atomic<uint64_t> posted{0};
  alignas(64) std::atomic<uint64_t> consumed{0};
  alignas(64) ChunkHead head[2]{};
};
constexpr size_t kDataOff = (sizeof(ShmChannel) + 63) / 64 * 64;

constexpr size_t kMinChunk = size_t{16} << 10;
constexpr size_t kPage = 4096;

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

ShmChannel& chan(uint8_t* p) { return *std::launder(reinterpret_cast<ShmChannel*>(p)); }
uint8_t* data(uint8_t* p, uint64_t chunk, size_t chunk_bytes) { return p + kDataOff + (chunk & 1) * chunk_bytes; }

// One transfer's progress: chunks [first, end) of its channel's counter.
struct Step {
  const ShmTransfer* x;
  uint8_t* ch;
  uint64_t next, end;
};

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

size_t shm_p2p_chunk_bytes(size_t buffer_bytes, int n) {
  // Two chunks per ordered pair: the channels together take about what the slots take.
  return std::max(kMinChunk, round_up(buffer_bytes / (2 * static_cast<size_t>(std::max(n, 1))), kPage));
}

size_t shm_channel_bytes(size_t chunk_bytes) { return round_up(kDataOff + 2 * chunk_bytes, kPage); }

void shm_init_channel(uint8_t* channel) { new (channel) ShmChannel{}; }

void shm_transfer(ShmGroup& g, const std::vector<ShmTransfer>& xfers, const char* what) {
  self_copies(g, xfers, what);
  const size_t cb = g.chunk_bytes();
  const int me = g.me();
  const int me_rank = g.global_rank(me);

  // Chunk ranges: this rank is the only writer of `posted` on its outgoing channels and of
  // `consumed` on its incoming ones, so each transfer's range is known before anything moves.
  std::map<uint8_t*, uint64_t> cursor;
  std::vector<Step> steps;
  for (const auto& x : xfers) {
    if (x.peer == me) continue;
    uint8_t* ch = x.send ? g.channel(me, x.peer) : g.channel(x.peer, me);
    auto it = cursor.find(ch);
    if (it == cursor.end()) {
      ShmChannel& c = chan(ch);
      it = cursor.emplace(ch, (x.send ? c.posted : c.consumed).load(std::memory_order_relaxed)).first;
    }
    const uint64_t chunks = std::max<uint64_t>(1, (x.bytes + cb - 1) / cb);
    steps.push_back({&x, ch, it->second, it->second + chunks});
    it->second += chunks;
  }

  Deadline dl = Deadline::after(g.timeout());
  size_t open = steps.size();
  while (open > 0) {
    const uint32_t seen = g.bell();  // read before scanning: a ring after this wakes the wait below
    bool moved = false;
    open = 0;
    for (Step& s : steps) {
      const ShmTransfer& x = *s.x;
      ShmChannel& c = chan(s.ch);
      const uint64_t first = s.end - std::max<uint64_t>(1, (x.bytes + cb - 1) / cb);
      if (x.send) {
        // In order on the channel: earlier transfers have posted everything before s.next.
        while (s.next < s.end && c.posted.load(std::memory_order_relaxed) == s.next &&
               s.next < c.consumed.load(std::memory_order_acquire) + 2) {
          const uint64_t off = (s.next - first) * cb, len = std::min<uint64_t>(cb, x.bytes - off);
          if (len) std::memcpy(data(s.ch, s.next, cb), x.buf + off, len);
          c.head[s.next & 1] = {x.bytes, off, len, static_cast<uint32_t>(x.dtype)};
          c.posted.store(++s.next, std::memory_order_release);
          g.ring(x.peer);
          moved = true;
        }
        if (c.consumed.load(std::memory_order_acquire) < s.end) ++open;
      } else {
        while (s.next < s.end && c.consumed.load(std::memory_order_relaxed) == s.next &&
               s.next < c.posted.load(std::memory_order_acquire)) {
          const ChunkHead h = c.head[s.next & 1];
          const uint64_t off = (s.next - first) * cb;
          if (h.msg_bytes != x.bytes || h.dtype != static_cast<uint32_t>(x.dtype) || h.offset != off) {
            const int peer = g.global_rank(x.peer);
            const auto dt = static_cast<DataType>(h.dtype);
            const size_t es = dtype_size(x.dtype), pes = dtype_size(dt);
            std::ostringstream os;
            os << "rank " << me_rank << " " << what << ": mismatched point-to-point transfer from rank " << peer
               << ": rank " << me_rank << " expects " << (es ? x.bytes / es : 0) << " " << to_string(x.dtype)
               << " element(s) (" << x.bytes << " bytes) but rank " << peer << " sent " << (pes ? h.msg_bytes / pes : 0)
               << " " << to_string(dt) << " element(s) (" << h.msg_bytes << " bytes)";
            // The culprit is the rank that found the disagreement: the others' errors name it.
            g.fail(ErrorCode::InvalidArgument, me_rank, os.str());
          }
          if (h.len) std::memcpy(x.buf + off, data(s.ch, s.next, cb), h.len);
          c.consumed.store(++s.next, std::memory_order_release);
          g.ring(x.peer);
          moved = true;
        }
        if (s.next < s.end) ++open;
      }
    }
    if (open == 0) break;
    if (moved) {
      dl = Deadline::after(g.timeout());
      continue;
    }
    if (!g.wait_bell(seen, dl)) {
      std::vector<int> waiting;
      for (const Step& s : steps) {
        const bool done = s.x->send ? chan(s.ch).consumed.load() >= s.end : s.next >= s.end;
        const int peer = g.global_rank(s.x->peer);
        if (!done && std::find(waiting.begin(), waiting.end(), peer) == waiting.end()) waiting.push_back(peer);
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
