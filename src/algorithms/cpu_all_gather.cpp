// All-gather on host shared memory: each round every rank stages its piece in its slot, then
// copies every rank's piece to its place in the output. One sync point per round.
#include <algorithm>
#include <cstring>

#include "algorithms/cpu_algorithms.hpp"

namespace actorcc::cpu {

void all_gather(ShmGroup& g, const CollArgs& a) {
  const size_t total = a.count * dtype_size(a.dtype);  // bytes per rank
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  // In place (send == recv + me * total): our own block is already where it belongs.
  const bool in_place = send == recv + g.me() * total;
  for (size_t off = 0; off < total; off += g.buffer_bytes()) {
    const size_t len = std::min(g.buffer_bytes(), total - off);
    const uint64_t round = g.next_round();
    std::memcpy(g.buffer(g.me(), round), send + off, len);
    g.sync("all_gather");
    for (int p = 0; p < g.size(); ++p) {
      if (p == g.me()) {
        if (!in_place) std::memcpy(recv + p * total + off, send + off, len);
        continue;
      }
      std::memcpy(recv + p * total + off, g.buffer(p, round), len);
    }
  }
}

}  // namespace actorcc::cpu
