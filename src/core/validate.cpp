#include "core/validate.hpp"

#include <cstdio>
#include <limits>
#include <string>

#include "common/text.hpp"

namespace actorcc {
namespace {

[[noreturn]] void bad(int rank, const CollArgs& a, const std::string& why) {
  throw InvalidArgument(cat(to_string(a.coll), ": ", why), rank);
}

constexpr size_t kMax = std::numeric_limits<size_t>::max();

bool is_p2p(Collective c) { return c == Collective::Send || c == Collective::Recv || c == Collective::SendRecv; }

// Calls whose buffers hold world x count elements on some side.
bool spans_world(Collective c) {
  return c == Collective::AllGather || c == Collective::ReduceScatter || c == Collective::AllToAll ||
         c == Collective::Gather || c == Collective::Scatter;
}

bool has_root(Collective c) {
  return c == Collective::Broadcast || c == Collective::Reduce || c == Collective::Gather || c == Collective::Scatter;
}

void check_dtype(const CollArgs& a, DataType t, int rank) {
  if (static_cast<unsigned>(t) >= kNumDataTypes) bad(rank, a, cat("unsupported dtype ", int(t)));
}

void check_peer(const CollArgs& a, int peer, int rank, int world) {
  if (peer < 0 || peer >= world)
    bad(rank, a, cat("peer ", peer, " is not a rank of this group of ", world));
}

void check_aligned(const CollArgs& a, const void* p, size_t esize, int rank) {
  if (reinterpret_cast<uintptr_t>(p) % esize)
    bad(rank, a, cat("buffer not aligned to its ", esize, "-byte element size"));
}

// Sum of world counts; throws if it (or its byte size) overflows.
size_t total_of(const CollArgs& a, const size_t* counts, const char* which, int rank, int world, size_t esize) {
  if (!counts) bad(rank, a, std::string(which) + " is null");
  size_t total = 0;
  for (int k = 0; k < world; ++k) {
    if (counts[k] > kMax / esize - total)
      bad(rank, a, cat(which, " sum to more elements than fit the byte size (at rank ", k, ")"));
    total += counts[k];
  }
  return total;
}

std::string range_text(const void* p, size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%p, +%zu bytes)", p, bytes);
  return buf;
}

// Input and output memory may coincide only in the one in-place layout each call defines (as in
// NCCL): the same buffer for all_reduce / broadcast / reduce, this rank's block of the full
// buffer for reduce_scatter / all_gather, the root's block for gather / scatter. Any other overlap
// (an output that is a shifted view of the input) would have the algorithms read bytes they have
// already overwritten: wrong data, no error. Compared by address range, so two tensor objects
// viewing the same memory count the same as one. `send_bytes` / `recv_bytes` are this rank's
// extents; a buffer this rank does not use (off-root) is not compared.
void check_overlap(const CollArgs& a, int rank, int world, size_t esize, bool uses_send, bool uses_recv) {
  if (!uses_send || !uses_recv || !a.send || !a.recv) return;
  const size_t n = a.count * esize, full = n * static_cast<size_t>(world);
  size_t send_bytes = n, recv_bytes = n;
  const auto s = reinterpret_cast<uintptr_t>(a.send), r = reinterpret_cast<uintptr_t>(a.recv);
  bool in_place = false;
  const char* layout = "recv == send";
  switch (a.coll) {
    case Collective::ReduceScatter:
      send_bytes = full;
      in_place = r == s + static_cast<size_t>(rank) * n;
      layout = "recv == send + rank x recv_count";
      break;
    case Collective::AllGather:
      recv_bytes = full;
      in_place = s == r + static_cast<size_t>(rank) * n;
      layout = "send == recv + rank x send_count";
      break;
    case Collective::Gather:
      recv_bytes = full;
      in_place = s == r + static_cast<size_t>(a.root) * n;
      layout = "send == recv + root x send_count";
      break;
    case Collective::Scatter:
      send_bytes = full;
      in_place = r == s + static_cast<size_t>(a.root) * n;
      layout = "recv == send + root x recv_count";
      break;
    case Collective::AllToAll:
      send_bytes = recv_bytes = full;
      layout = nullptr;  // no in-place form
      break;
    default:  // all_reduce, broadcast, reduce
      in_place = r == s;
      break;
  }
  if (in_place || !(s < r + recv_bytes && r < s + send_bytes)) return;
  bad(rank, a,
      "send " + range_text(a.send, send_bytes) + " and recv " + range_text(a.recv, recv_bytes) +
          " buffers overlap" +
          (layout ? std::string(" but are not the in-place layout (") + layout + ")"
                  : std::string(" (all_to_all is not in place)")));
}

void validate_batch(const CollArgs& a, int rank, int world) {
  if (a.num_ops > 0 && !a.ops) bad(rank, a, cat("ops is null with ", a.num_ops, " ops"));
  size_t self_sends = 0, self_recvs = 0;
  for (size_t i = 0; i < a.num_ops; ++i) {
    const P2POp& op = a.ops[i];
    const std::string at = cat("op ", i, ": ");
    if (op.kind != P2POp::Kind::Send && op.kind != P2POp::Kind::Recv) bad(rank, a, at + "kind is neither send nor recv");
    check_dtype(a, op.dtype, rank);
    check_peer(a, op.peer, rank, world);
    const size_t es = dtype_size(op.dtype);
    if (op.count > kMax / es) bad(rank, a, cat(at, "count ", op.count, " overflows the byte size"));
    if (op.count && !op.buf) bad(rank, a, cat(at, "buffer is null with count ", op.count));
    check_aligned(a, op.buf, es, rank);
    if (op.peer == rank) ++(op.kind == P2POp::Kind::Send ? self_sends : self_recvs);
  }
  // Transfers to this rank itself pair up in order (k-th send with k-th recv); an unpaired one
  // could never complete.
  if (self_sends != self_recvs)
    bad(rank, a, cat(self_sends, " send(s) to this rank itself but ", self_recvs,
                     " recv(s) from it; each send to self needs a recv from self in the same batch"));
}

}  // namespace

void validate_args(const CollArgs& a, int rank, int world) {
  if (a.coll == Collective::Barrier) return;
  if (static_cast<unsigned>(a.coll) >= kNumCollectives) bad(rank, a, "unknown collective");
  if (a.coll == Collective::SendRecv) return validate_batch(a, rank, world);
  check_dtype(a, a.dtype, rank);
  bool reduces = a.coll == Collective::AllReduce || a.coll == Collective::ReduceScatter || a.coll == Collective::Reduce;
  if (reduces && static_cast<unsigned>(a.op) >= kNumRedOps) bad(rank, a, cat("unsupported op ", int(a.op)));
  if (has_root(a.coll) && (a.root < 0 || a.root >= world))
    bad(rank, a, cat("root ", a.root, " is not a rank of this group of ", world));
  if (is_p2p(a.coll)) {
    check_peer(a, a.peer, rank, world);
    if (a.peer == rank) bad(rank, a, "peer is this rank itself; use send_recv with a send and a recv to self");
  }
  const size_t esize = dtype_size(a.dtype);
  const bool root = rank == a.root;
  if (a.coll == Collective::AllToAllV) {
    const size_t in = total_of(a, a.send_counts, "send_counts", rank, world, esize);
    const size_t out = total_of(a, a.recv_counts, "recv_counts", rank, world, esize);
    if (in && !a.send) bad(rank, a, cat("send buffer is null with ", in, " elements to send"));
    if (out && !a.recv) bad(rank, a, cat("recv buffer is null with ", out, " elements to receive"));
    check_aligned(a, a.send, esize, rank);
    check_aligned(a, a.recv, esize, rank);
    const auto* s = static_cast<const uint8_t*>(a.send);
    const auto* r = static_cast<const uint8_t*>(a.recv);
    if (in && out && s < r + out * esize && r < s + in * esize) bad(rank, a, "send and recv buffers overlap");
    return;
  }
  // The largest buffer a call touches is count * world elements (gather/scatter side).
  size_t span = spans_world(a.coll) ? static_cast<size_t>(world) : 1;
  if (a.count > kMax / esize / span) bad(rank, a, cat("count ", a.count, " overflows the byte size"));
  if (a.count == 0) return;
  // Buffers that only the root (or only others) use may be null where unused.
  bool needs_send = a.coll != Collective::Recv && !((a.coll == Collective::Broadcast || a.coll == Collective::Scatter) && !root);
  bool needs_recv = a.coll != Collective::Send && !((a.coll == Collective::Reduce || a.coll == Collective::Gather) && !root);
  if (!a.send && needs_send) bad(rank, a, cat("send buffer is null with count ", a.count));
  if (!a.recv && needs_recv) bad(rank, a, cat("recv buffer is null with count ", a.count));
  uintptr_t misalign = (reinterpret_cast<uintptr_t>(a.send) | reinterpret_cast<uintptr_t>(a.recv)) % esize;
  if (misalign) bad(rank, a, cat("buffer not aligned to its ", esize, "-byte element size"));
  check_overlap(a, rank, world, esize, needs_send, needs_recv);
}

}  // namespace actorcc
