// Send, Recv, SendRecv batches, all_to_all(_v), gather and scatter on host shared memory: the
// call's transfers (algorithms/p2p_plan.hpp) progress together over the shm channels
// (transport/shm/shm_p2p.hpp), which also check every message against its sender's size.
#include <vector>

#include "algorithms/cpu_algorithms.hpp"
#include "algorithms/p2p_plan.hpp"
#include "transport/shm/shm_p2p.hpp"

namespace actorcc::cpu {

void send_recv(ShmGroup& g, const CollArgs& a) {
  // Global rank r is local index r (the CPU backend serves one host only).
  std::vector<ShmTransfer> xfers;
  for (const P2POp& op : p2p_transfers(a, g.me(), g.size()))
    xfers.push_back({op.kind == P2POp::Kind::Send, static_cast<uint8_t*>(op.buf), op.count * dtype_size(op.dtype),
                     op.dtype, op.peer});
  shm_transfer(g, xfers, to_string(a.coll).data());
}

}  // namespace actorcc::cpu
