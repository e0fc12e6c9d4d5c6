// Reduce-scatter on host shared memory: each round every rank stages, for every destination
// rank p, the round's piece of block p in its slot (piece p at p * c); then rank r reduces
// piece r of every slot, in rank order, straight into its output. One sync point per round.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/cpu_algorithms.hpp"
#include "reduce/host_reduce.hpp"

namespace actorcc::cpu {

void reduce_scatter(ShmGroup& g, const CollArgs& a) {
  const int n = g.size();
  const size_t es = dtype_size(a.dtype);
  const size_t per_round = std::max<size_t>(1, g.buffer_bytes() / (es * static_cast<size_t>(n)));
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  std::vector<const void*> ins(n);
  for (size_t off = 0; off < a.count; off += per_round) {
    const size_t c = std::min(per_round, a.count - off);
    const uint64_t round = g.next_round();
    uint8_t* mine = g.buffer(g.me(), round);
    for (int p = 0; p < n; ++p) std::memcpy(mine + p * c * es, send + (p * a.count + off) * es, c * es);
    g.sync("reduce_scatter");
    for (int p = 0; p < n; ++p) ins[p] = g.buffer(p, round) + g.me() * c * es;
    // In place (recv == send + me * count): this writes only the part of our own block that
    // was staged above, so later rounds still read untouched input.
    reduce_n(recv + off * es, ins.data(), n, c, a.dtype, a.op);
  }
}

}  // namespace actorcc::cpu
