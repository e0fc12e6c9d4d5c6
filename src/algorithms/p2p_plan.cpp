#include "algorithms/p2p_plan.hpp"

#include <cstdint>

namespace actorcc {

bool is_p2p_based(Collective c) {
  switch (c) {
    case Collective::Send:
    case Collective::Recv:
    case Collective::SendRecv:
    case Collective::AllToAll:
    case Collective::AllToAllV:
    case Collective::Gather:
    case Collective::Scatter: return true;
    default: return false;
  }
}

std::vector<P2POp> p2p_transfers(const CollArgs& a, int rank, int world) {
  using K = P2POp::Kind;
  const size_t es = dtype_size(a.dtype);
  auto* send = static_cast<uint8_t*>(const_cast<void*>(a.send));
  auto* recv = static_cast<uint8_t*>(a.recv);
  std::vector<P2POp> x;
  switch (a.coll) {
    case Collective::Send: x.push_back({K::Send, send, a.count, a.dtype, a.peer}); break;
    case Collective::Recv: x.push_back({K::Recv, recv, a.count, a.dtype, a.peer}); break;
    case Collective::SendRecv: x.assign(a.ops, a.ops + a.num_ops); break;
    case Collective::AllToAll:
    case Collective::AllToAllV: {
      const bool v = a.coll == Collective::AllToAllV;
      size_t in_off = 0, out_off = 0;  // elements
      for (int p = 0; p < world; ++p) {
        const size_t in = v ? a.send_counts[p] : a.count, out = v ? a.recv_counts[p] : a.count;
        x.push_back({K::Send, send + in_off * es, in, a.dtype, p});
        x.push_back({K::Recv, recv + out_off * es, out, a.dtype, p});
        in_off += in;
        out_off += out;
      }
      break;
    }
    case Collective::Gather:
    case Collective::Scatter: {
      // Mirror images: the root exchanges block p of its world-sized buffer with rank p (its
      // own block is a local copy, none in place); the others send (gather) or receive
      // (scatter) their one block.
      const bool gather = a.coll == Collective::Gather;
      uint8_t* blocks = gather ? recv : send;
      uint8_t* own = gather ? send : recv;
      const K at_root = gather ? K::Recv : K::Send;
      if (rank != a.root) {
        x.push_back({gather ? K::Send : K::Recv, own, a.count, a.dtype, a.root});
        break;
      }
      for (int p = 0; p < world; ++p) {
        uint8_t* blk = blocks + static_cast<size_t>(p) * a.count * es;
        if (p != rank) {
          x.push_back({at_root, blk, a.count, a.dtype, p});
        } else if (blk != own) {
          x.push_back({K::Send, gather ? own : blk, a.count, a.dtype, p});
          x.push_back({K::Recv, gather ? blk : own, a.count, a.dtype, p});
        }
      }
      break;
    }
    default: break;
  }
  return x;
}

}  // namespace actorcc
