// Scatter on host shared memory: the root sends block r to rank r over the shm channels, all
// at once (its own block is a local copy, skipped in place); every other rank receives one.
#include <vector>

#include "algorithms/cpu_algorithms.hpp"
#include "transport/shm/shm_p2p.hpp"

namespace actorcc::cpu {

void scatter(ShmGroup& g, const CollArgs& a, int root_local) {
  const size_t bytes = a.count * dtype_size(a.dtype);
  auto* send = static_cast<uint8_t*>(const_cast<void*>(a.send));
  auto* recv = static_cast<uint8_t*>(a.recv);
  std::vector<ShmTransfer> xfers;
  if (g.me() != root_local) {
    xfers.push_back({false, recv, bytes, a.dtype, root_local});
  } else {
    for (int p = 0; p < g.size(); ++p) {
      uint8_t* src = send + static_cast<size_t>(p) * bytes;
      if (p == root_local && src == recv) continue;  // in place
      xfers.push_back({true, src, bytes, a.dtype, p});
      if (p == root_local) xfers.push_back({false, recv, bytes, a.dtype, p});
    }
  }
  shm_transfer(g, xfers, "scatter");
}

}  // namespace actorcc::cpu
