// What a backend, a transport or a route is given: the joined group (GroupContext) and one call
// (CollArgs). Everything below core/ and backends/ depends on this header, never on those.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "actorcc/communicator.hpp"  // P2POp
#include "actorcc/options.hpp"
#include "actorcc/peer_info.hpp"
#include "actorcc/types.hpp"
#include "actorcc/unique_id.hpp"
#include "bootstrap/bootstrap.hpp"
#include "common/abort_signal.hpp"

namespace actorcc {

// The calls between pairs of ranks (a send, a receive, a batch of them): they involve only their
// peers, unlike every collective.
inline bool is_point_to_point(Collective c) {
  return c == Collective::Send || c == Collective::Recv || c == Collective::SendRecv;
}

struct CollArgs {
  Collective coll = Collective::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // all_reduce/broadcast: elements; reduce_scatter: per-rank output; all_gather: per-rank input
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  void* stream = nullptr;  // the caller's cudaStream_t (actorcc::Stream)
  // Send / Recv: the other rank. SendRecv: the batch (ops[0..num_ops)).
  int peer = -1;
  const P2POp* ops = nullptr;
  size_t num_ops = 0;
  // AllToAllV: world entries each (count is unused).
  const size_t* send_counts = nullptr;
  const size_t* recv_counts = nullptr;
};

// What a backend is built from: the joined group, its topology and options.
struct GroupContext {
  int rank = 0;
  int world = 1;
  Options options;
  std::vector<PeerInfo> peers;
  int num_nodes = 1;
  std::vector<int> local_ranks;  // global ranks on this rank's node, in rank order
  int local_index = 0;           // this rank's index in local_ranks
  std::string group_tag;         // hex of the token: unique per group, names shm/sockets
  UniqueId id;                   // the group's id (root address and token, for transports)
  Bootstrap* bootstrap = nullptr;
  std::shared_ptr<AbortSignal> abort;
  // A sub-group (backends/hier/sub_group.hpp): rank r here is rank members[r] of the whole group.
  // Empty for the whole group. Errors name global_rank(r), the rank the user knows.
  std::vector<int> members;
  int global_rank(int r) const { return members.empty() || r < 0 || r >= static_cast<int>(members.size()) ? r : members[r]; }
  // Tells every rank that the group is broken, with `why` (their pending and later calls
  // raise it), unless it is already aborted: a rank that fails because of an abort must not
  // answer it with one of its own, which would replace the culprit's reason at the ranks that
  // have not heard it yet. `culprit`: the rank at fault, where it is another (-1: this one).
  void abort_group(const std::string& why, int culprit = -1) const {
    if (!abort->raised()) bootstrap->abort(why, culprit);
  }
};

}  // namespace actorcc
