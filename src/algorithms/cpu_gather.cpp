// Gather on host shared memory: every rank sends its block to the root over the shm
// channels; the root receives all of them at once into rank order (its own block is a local
// copy, skipped in place).
#include <vector>

#include "algorithms/cpu_algorithms.hpp"
#include "transport/shm/shm_p2p.hpp"

namespace actorcc::cpu {

void gather(ShmGroup& g, const CollArgs& a, int root_local) {
  const size_t bytes = a.count * dtype_size(a.dtype);
  auto* send = static_cast<uint8_t*>(const_cast<void*>(a.send));
  auto* recv = static_cast<uint8_t*>(a.recv);
  std::vector<ShmTransfer> xfers;
  if (g.me() != root_local) {
    xfers.push_back({true, send, bytes, a.dtype, root_local});
  } else {
    for (int p = 0; p < g.size(); ++p) {
      uint8_t* dst = recv + static_cast<size_t>(p) * bytes;
      if (p == root_local && dst == send) continue;  // in place
      if (p == root_local) xfers.push_back({true, send, bytes, a.dtype, p});
      xfers.push_back({false, dst, bytes, a.dtype, p});
    }
  }
  shm_transfer(g, xfers, "gather");
}

}  // namespace actorcc::cpu
