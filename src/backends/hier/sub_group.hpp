// A sub-group: a GroupContext over a subset of a group's ranks (one node's ranks, for the
// hierarchical backends), so a backend built for a whole group (the CUDA backend over NVLink)
// can serve just those ranks. Its bootstrap view gathers only among the members, over TCP
// pairs between them (transport/tcp), so the node groups of different nodes never wait for
// each other; aborting it aborts the whole group, and errors name the whole group's ranks
// (GroupContext::members).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "group/group_context.hpp"

namespace actorcc {

namespace tcp {
class Mesh;
}

class SubBootstrap final : public Bootstrap {
 public:
  // `mesh` holds a pair with every other member; `members` are whole-group ranks, sorted.
  SubBootstrap(Bootstrap& parent, std::shared_ptr<tcp::Mesh> mesh, std::vector<int> members, int self,
               const AbortSignal* abort);
  ~SubBootstrap() override;

  int rank() const override { return me_; }
  int world() const override { return static_cast<int>(members_.size()); }
  const std::vector<std::string>& peer_blobs() const override { return blobs_; }
  std::vector<std::string> allgather(const std::string& blob, Deadline deadline) override;
  void barrier(Deadline deadline) override { allgather(std::string(), deadline); }
  void abort(const std::string& reason, int culprit = -1) override { parent_.abort(reason, culprit); }
  // Departures are the whole group's business: its communicator listens on the parent.
  void on_departure(std::function<void(const Departure&)>) override {}
  void set_collectives(uint64_t) override {}

 private:
  Bootstrap& parent_;
  std::shared_ptr<tcp::Mesh> mesh_;
  std::vector<int> members_;
  int me_;
  std::vector<std::string> blobs_;
  const AbortSignal* abort_ = nullptr;
  uint64_t calls_ = 0;
};

// A GroupContext over `members` (whole-group ranks, sorted, this rank among them) that owns
// its bootstrap view. `tag` makes its shm and socket names distinct from the whole group's.
struct SubGroup {
  std::unique_ptr<SubBootstrap> bootstrap;
  GroupContext ctx;
};

// Collective over every rank of `parent` (one bootstrap all-gather to connect the pairs):
// every rank passes its own sub-group, and the sub-groups of a call must be disjoint (q is in
// r's members exactly when r is in q's). Bounded by the join timeout and the group's abort.
std::unique_ptr<SubGroup> make_sub_group(const GroupContext& parent, const std::vector<int>& members,
                                         const std::string& tag);

}  // namespace actorcc
