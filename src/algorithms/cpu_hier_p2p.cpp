// Point-to-point and the calls built on it across nodes. Each message goes the way its two
// ranks are placed: shm channels inside a node (transport/shm/shm_p2p.hpp), the TCP mesh
// between nodes. The batch's two halves progress together (the TCP half on the helper
// thread), as one batch on one host does: a rank never waits for a node peer before it
// serves a remote one, or the reverse, so what does not deadlock on one host does not here.
#include <sstream>
#include <vector>

#include "actorcc/error.hpp"
#include "algorithms/cpu_hier.hpp"
#include "algorithms/p2p_plan.hpp"
#include "transport/shm/shm_p2p.hpp"

namespace actorcc::cpu {
namespace {

// Point-to-point frames carry their element type in the tag (collective tags never set the
// top bit), so the receiver's frame check catches a type mismatch as well as a size one.
constexpr uint64_t kP2PTag = uint64_t{1} << 63;
uint64_t p2p_tag(DataType t) { return kP2PTag | static_cast<uint64_t>(t); }

// The TCP layer's mismatch in the words of the shm path's: what this rank expected, what the
// peer sent, in elements of their types.
[[noreturn]] void rethrow_mismatch(const tcp::FrameMismatch& m, const tcp::Transfer& x, int self, const char* what) {
  const auto want = static_cast<DataType>(x.tag & ~kP2PTag);
  std::ostringstream os;
  os << "rank " << self << " " << what << ": mismatched point-to-point transfer from rank " << m.peer << ": rank "
     << self << " expects " << x.bytes / dtype_size(want) << " " << to_string(want) << " element(s) (" << x.bytes
     << " bytes) but rank " << m.peer << " sent ";
  if (m.sent_tag & kP2PTag) {
    const auto got = static_cast<DataType>(m.sent_tag & ~kP2PTag);
    os << m.sent_bytes / dtype_size(got) << " " << to_string(got) << " element(s) (" << m.sent_bytes << " bytes)";
  } else {
    os << "a collective's message of " << m.sent_bytes << " bytes (the ranks called different collectives)";
  }
  throw InvalidArgument(os.str(), self, m.peer);
}

void tcp_side(HierGroup& g, const std::vector<tcp::Transfer>& xs, const char* what) {
  try {
    tcp::transfer(xs, Deadline::after(g.timeout), g.abort);
  } catch (const tcp::FrameMismatch& m) {
    for (const auto& x : xs)
      if (!x.send && x.pair->peer() == m.peer) rethrow_mismatch(m, x, g.rank, what);
    throw;
  }
}

}  // namespace

void hier_send_recv(HierGroup& g, const CollArgs& a) {
  const auto& l = g.layout;
  const int my_node = l.node_of[g.rank];
  const char* what = to_string(a.coll).data();
  std::vector<ShmTransfer> shm;
  std::vector<tcp::Transfer> net;
  for (const P2POp& op : p2p_transfers(a, g.rank, l.world())) {
    if (op.peer < 0 || op.peer >= l.world())
      throw InvalidArgument("rank " + std::to_string(g.rank) + " " + what + ": peer " + std::to_string(op.peer) +
                                " is not a rank of the group (world " + std::to_string(l.world()) + ")",
                            g.rank);
    const bool send = op.kind == P2POp::Kind::Send;
    const size_t bytes = op.count * dtype_size(op.dtype);
    if (l.node_of[op.peer] == my_node)
      shm.push_back({send, static_cast<uint8_t*>(op.buf), bytes, op.dtype, l.local_index[op.peer]});
    else
      net.push_back({&g.mesh->pair(op.peer), send, op.buf, bytes, p2p_tag(op.dtype)});
  }
  if (net.empty()) return shm_transfer(*g.node, shm, what);
  if (shm.empty()) return tcp_side(g, net, what);
  Overlap o(*g.helper, g.fail_group);
  const uint64_t t = o.post([&] { tcp_side(g, net, what); });
  o.here([&] { shm_transfer(*g.node, shm, what); });
  o.wait(t);
}

}  // namespace actorcc::cpu
