// The sub-group's all-gather is a ring-shift schedule over its pairs: in round d every member
// sends to the member d places after it and receives from the one d places before, both at
// once (tcp::exchange), so no round waits on another and n - 1 rounds deliver every blob.
#include "backends/hier/sub_group.hpp"

#include <algorithm>
#include <cstdint>

#include "actorcc/error.hpp"
#include "bootstrap/id_fields.hpp"
#include "topology/topology.hpp"
#include "transport/tcp/mesh.hpp"

namespace actorcc {

SubBootstrap::SubBootstrap(Bootstrap& parent, std::shared_ptr<tcp::Mesh> mesh, std::vector<int> members, int self,
                           const AbortSignal* abort)
    : parent_(parent), mesh_(std::move(mesh)), members_(std::move(members)), abort_(abort) {
  auto it = std::find(members_.begin(), members_.end(), self);
  if (it == members_.end()) throw InvalidArgument("sub-group without this rank", self);
  me_ = static_cast<int>(it - members_.begin());
  for (int r : members_) blobs_.push_back(parent_.peer_blobs().at(r));
}

SubBootstrap::~SubBootstrap() = default;

std::vector<std::string> SubBootstrap::allgather(const std::string& blob, Deadline deadline) {
  const int n = world();
  std::vector<std::string> out(n);
  out[me_] = blob;
  // Tags keep the calls apart: a member that runs another call is named by the pair.
  const uint64_t tag = (uint64_t{0x5b} << 56) | (++calls_ << 8);
  for (int d = 1; d < n; ++d) {
    const int to = members_[(me_ + d) % n], from_idx = (me_ - d + n) % n, from = members_[from_idx];
    tcp::Pair& pto = mesh_->pair(to);
    tcp::Pair& pfrom = mesh_->pair(from);
    uint64_t mine = blob.size(), theirs = 0;
    tcp::exchange(&pto, &mine, sizeof mine, &pfrom, &theirs, sizeof theirs, tag | 1, deadline, abort_);
    if (theirs > (size_t{64} << 20))
      throw Error(ErrorCode::Internal, "sub-group all-gather: rank " + std::to_string(from) + " sent a size of " +
                                           std::to_string(theirs) + " bytes",
                  parent_.rank());
    out[from_idx].resize(theirs);
    tcp::exchange(&pto, blob.data(), blob.size(), &pfrom, out[from_idx].data(), theirs, tag | 2, deadline, abort_);
  }
  return out;
}

std::unique_ptr<SubGroup> make_sub_group(const GroupContext& parent, const std::vector<int>& members,
                                         const std::string& tag) {
  std::vector<int> peers;
  for (int r : members)
    if (r != parent.rank) peers.push_back(r);
  const bootstrap::IdFields f = bootstrap::read_id(parent.id);
  std::shared_ptr<tcp::Mesh> mesh = tcp::Mesh::connect(*parent.bootstrap, f.token, f.root, peers,
                                                       Deadline::after(parent.options.join_timeout), parent.abort.get());
  auto sg = std::make_unique<SubGroup>();
  sg->bootstrap = std::make_unique<SubBootstrap>(*parent.bootstrap, std::move(mesh), members, parent.rank,
                                                 parent.abort.get());
  GroupContext& c = sg->ctx;
  c.rank = sg->bootstrap->rank();
  c.world = sg->bootstrap->world();
  c.options = parent.options;
  c.members = members;
  for (int i = 0; i < c.world; ++i) {
    PeerInfo p = parent.peers.at(members[i]);
    p.rank = i;
    c.peers.push_back(p);
  }
  c.num_nodes = topology::assign_nodes(c.peers);
  for (const auto& p : c.peers)
    if (p.node == c.peers[c.rank].node) c.local_ranks.push_back(p.rank);
  c.local_index = c.peers[c.rank].local_rank;
  c.group_tag = parent.group_tag + tag;
  c.id = parent.id;
  c.bootstrap = sg->bootstrap.get();
  c.abort = parent.abort;
  return sg;
}

}  // namespace actorcc
