// Send, Recv and batches of both (SendRecv) on host shared memory: each becomes a list of
// channel transfers that progress together (transport/shm/shm_p2p.hpp).
#include <vector>

#include "algorithms/cpu_algorithms.hpp"
#include "transport/shm/shm_p2p.hpp"

namespace actorcc::cpu {

void send_recv(ShmGroup& g, const CollArgs& a) {
  // Global rank r is local index r (the CPU backend serves one host only).
  std::vector<ShmTransfer> xfers;
  if (a.coll == Collective::Send) {
    xfers.push_back({true, static_cast<uint8_t*>(const_cast<void*>(a.send)), a.count * dtype_size(a.dtype), a.dtype, a.peer});
  } else if (a.coll == Collective::Recv) {
    xfers.push_back({false, static_cast<uint8_t*>(a.recv), a.count * dtype_size(a.dtype), a.dtype, a.peer});
  } else {
    for (size_t i = 0; i < a.num_ops; ++i) {
      const P2POp& op = a.ops[i];
      xfers.push_back({op.kind == P2POp::Kind::Send, static_cast<uint8_t*>(op.buf), op.count * dtype_size(op.dtype),
                       op.dtype, op.peer});
    }
  }
  shm_transfer(g, xfers, to_string(a.coll).data());
}

}  // namespace actorcc::cpu
