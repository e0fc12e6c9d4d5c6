// Broadcast on host shared memory: each round the root stages its piece, everyone else copies
// it out. One sync point per round.
#include <algorithm>
#include <cstring>

#include "algorithms/cpu_algorithms.hpp"

namespace actorcc::cpu {

void broadcast(ShmGroup& g, const CollArgs& a, int root_local) {
  const size_t total = a.count * dtype_size(a.dtype);
  const bool is_root = g.me() == root_local;
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  for (size_t off = 0; off < total; off += g.buffer_bytes()) {
    const size_t len = std::min(g.buffer_bytes(), total - off);
    const uint64_t round = g.next_round();
    if (is_root) std::memcpy(g.buffer(g.me(), round), send + off, len);
    g.sync("broadcast");
    if (is_root) {
      if (recv != send) std::memcpy(recv + off, send + off, len);
    } else {
      std::memcpy(recv + off, g.buffer(root_local, round), len);
    }
  }
}

}  // namespace actorcc::cpu
