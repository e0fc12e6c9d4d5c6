#include "algorithms/cuda/p2p_batch.hpp"

#include <string>

#include "actorcc/error.hpp"

namespace actorcc::cuda {

P2PBatch build_p2p_batch(const std::vector<P2POp>& ops, int rank) {
  const std::string who = "rank " + std::to_string(rank) + ": ";
  std::vector<P2PTask> by_lane[kMaxP2PLanes];  // sends to p: lane p, receives from p: 8 + p, copies: 16
  std::vector<const P2POp*> self_sends, self_recvs;
  for (const P2POp& op : ops) {
    const size_t nbytes = op.count * dtype_size(op.dtype);
    if (op.peer == rank) {
      (op.kind == P2POp::Kind::Send ? self_sends : self_recvs).push_back(&op);
      continue;
    }
    P2PTask t;
    t.nbytes = nbytes;
    t.header = p2p_header(nbytes, op.dtype);
    t.peer = op.peer;
    if (op.kind == P2POp::Kind::Send) {
      t.kind = static_cast<int>(P2PKind::Send);
      t.src = static_cast<const char*>(op.buf);
      by_lane[op.peer].push_back(t);
    } else {
      t.kind = static_cast<int>(P2PKind::Recv);
      t.dst = static_cast<char*>(op.buf);
      by_lane[8 + op.peer].push_back(t);
    }
  }
  if (self_sends.size() != self_recvs.size())
    throw InvalidArgument(who + std::to_string(self_sends.size()) + " send(s) to itself but " +
                              std::to_string(self_recvs.size()) + " receive(s) from itself in one batch",
                          rank);
  for (size_t i = 0; i < self_sends.size(); ++i) {
    const P2POp &s = *self_sends[i], &r = *self_recvs[i];
    if (s.count != r.count || s.dtype != r.dtype)
      throw InvalidArgument(who + "send to itself #" + std::to_string(i) + " has " + std::to_string(s.count) + " " +
                                std::string(to_string(s.dtype)) + " but the receive from itself has " + std::to_string(r.count) +
                                " " + std::string(to_string(r.dtype)),
                            rank);
    P2PTask t;
    t.kind = static_cast<int>(P2PKind::Copy);
    t.src = static_cast<const char*>(s.buf);
    t.dst = static_cast<char*>(r.buf);
    t.nbytes = s.count * dtype_size(s.dtype);
    t.peer = rank;
    by_lane[kMaxP2PLanes - 1].push_back(t);
  }
  P2PBatch b;
  int n = 0;
  for (const auto& lane : by_lane) {
    if (lane.empty()) continue;
    if (n + lane.size() > size_t(kMaxP2PTasks))
      throw InvalidArgument(who + "a batch of " + std::to_string(ops.size()) +
                                " transfers; the CUDA backend takes at most " + std::to_string(kMaxP2PTasks) +
                                " per call (split it, the same way on every rank)",
                            rank);
    b.lane_begin[b.nlanes++] = n;
    for (const P2PTask& t : lane) b.task[n++] = t;
  }
  b.lane_begin[b.nlanes] = n;
  return b;
}

}  // namespace actorcc::cuda
