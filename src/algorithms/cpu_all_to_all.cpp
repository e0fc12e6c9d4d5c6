// All-to-all on host shared memory: one send to and one receive from every rank (this rank's
// own block is a local copy), all progressing at once over the shm channels. Equal blocks
// (AllToAll) or per-peer counts at prefix-sum offsets (AllToAllV); the receiver checks every
// block's size against the sender's, so counts that disagree fail naming both ranks.
#include <vector>

#include "algorithms/cpu_algorithms.hpp"
#include "transport/shm/shm_p2p.hpp"

namespace actorcc::cpu {

void all_to_all(ShmGroup& g, const CollArgs& a) {
  const int n = g.size();
  const size_t es = dtype_size(a.dtype);
  auto* send = static_cast<uint8_t*>(const_cast<void*>(a.send));
  auto* recv = static_cast<uint8_t*>(a.recv);
  const bool v = a.coll == Collective::AllToAllV;
  std::vector<ShmTransfer> xfers;
  xfers.reserve(2 * static_cast<size_t>(n));
  size_t in_off = 0, out_off = 0;  // elements
  for (int p = 0; p < n; ++p) {
    const size_t in = v ? a.send_counts[p] : a.count, out = v ? a.recv_counts[p] : a.count;
    xfers.push_back({true, send + in_off * es, in * es, a.dtype, p});
    xfers.push_back({false, recv + out_off * es, out * es, a.dtype, p});
    in_off += in;
    out_off += out;
  }
  shm_transfer(g, xfers, to_string(a.coll).data());
}

}  // namespace actorcc::cpu
