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
      if (rank != a.root) {
        x.push_back({K::Send, send, a.count, a.dtype, a.root});
        break;
      }
      for (int p = 0; p < world; ++p) {
        uint8_t* dst = recv + static_cast<size_t>(p) * a.count * es;
        if (p == rank && dst == send) continue;  // in place: already there
        if (p == rank) x.push_back({K::Send, send, a.count, a.dtype, p});
        x.push_back({K::Recv, dst, a.count, a.dtype, p});
      }
      break;
    case Collective::Scatter:
      if (rank != a.root) {
        x.push_back({K::Recv, recv, a.count, a.dtype, a.root});
        break;
      }
      for (int p = 0; p < world; ++p) {
        uint8_t* src = send + static_cast<size_t>(p) * a.count * es;
        if (p == rank && src == recv) continue;  // in place
        x.push_back({K::Send, src, a.count, a.dtype, p});
        if (p == rank) x.push_back({K::Recv, recv, a.count, a.dtype, p});
      }
      break;
    default: break;
  }
  return x;
}

}  // namespace actorcc
