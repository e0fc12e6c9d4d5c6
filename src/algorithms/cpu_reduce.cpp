// Reduce on host shared memory: each round every rank stages its piece in its slot, then the
// root reduces every slot in rank order into its output; the others only stage. One sync
// point per round (the two-buffer argument of shm_group.hpp holds: the root finishes its
// reads of round k before it reaches round k+1's sync point). Same reduction order as
// all-reduce, so reduce and all_reduce give the root the same bits.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/cpu_algorithms.hpp"
#include "reduce/host_reduce.hpp"

namespace actorcc::cpu {

void reduce(ShmGroup& g, const CollArgs& a, int root_local) {
  const size_t es = dtype_size(a.dtype);
  const size_t per_round = g.buffer_bytes() / es;
  const bool is_root = g.me() == root_local;
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  std::vector<const void*> ins(g.size());
  for (size_t off = 0; off < a.count; off += per_round) {
    const size_t c = std::min(per_round, a.count - off);
    const uint64_t round = g.next_round();
    std::memcpy(g.buffer(g.me(), round), send + off * es, c * es);
    g.sync("reduce");
    if (!is_root) continue;
    for (int p = 0; p < g.size(); ++p) ins[p] = g.buffer(p, round);
    reduce_n(recv + off * es, ins.data(), g.size(), c, a.dtype, a.op);
  }
}

}  // namespace actorcc::cpu
