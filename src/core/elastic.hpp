// Elastic membership (docs/elastic.md): what a communicator keeps so that its survivors can
// form a smaller group without the process that hosts its root, and the steps of shrink and
// grow that do not need the Communicator's internals. core/communicator.cpp calls these.
//
// At join every rank reserves a successor listener: a bound, listening TCP socket on the
// interface that reaches the group's root (one descriptor, no thread), and draws a fresh
// 128-bit token. Both ride in the rank's peer blob, so every rank learns every rank's
// successor address and token from the WELCOME, which only members receive. On shrink the
// lowest surviving rank starts a root on its reserved socket (serving world = survivors, the
// token derived from its successor token) and every survivor joins it with its new rank: no
// wait on the old root's process, which may be the dead one.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actorcc/error.hpp"
#include "actorcc/unique_id.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/root.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"
#include "common/abort_signal.hpp"

namespace actorcc::elastic {

// One rank's published successor: where a root of the next group may listen, and the secret it
// derives its token from.
struct Successor {
  std::string ip;
  uint16_t port = 0;
  wire::Token token{};
  // This rank's process runs the group's root (it made the id: UniqueId::create(), grow_id()).
  bool hosts_root = false;
};

// This rank's part of the elastic state of one communicator.
class Member {
 public:
  // Reserves the successor listener on the interface that reaches the root of `id`.
  // `digest` names the membership this group was formed for (0: none; a shrunk group carries
  // the hash of its survivor list, and every member must carry the same).
  static std::unique_ptr<Member> reserve(const UniqueId& id, uint64_t digest);

  // The peer blob this rank sends at join: the topology blob, then the successor record and
  // the digest.
  std::string wrap(const std::string& topology_blob) const;
  // After the join: every rank's topology blob (rank order), keeping every rank's successor.
  // Throws InvalidArgument naming the ranks whose digest differs from this rank's (they passed
  // another exclude list), on every rank alike.
  std::vector<std::string> unwrap_all(const std::vector<std::string>& blobs, int rank);

  const std::vector<Successor>& successors() const { return successors_; }
  // The lowest rank whose process hosts this group's root, from the peer blobs; -1 when none
  // does (the id's creator is no member). A grown group's root lives in the member that called
  // grow_id(): its death must name that rank, as a shrunk group's names its rank 0.
  int root_host() const;
  const Successor& mine() const { return mine_; }
  int listener() const { return listener_.get(); }
  // A successful shrink used this group's successors: a second one would serve a second
  // group on the same socket.
  bool used = false;

 private:
  net::Fd listener_;
  Successor mine_;
  uint64_t digest_ = 0;
  std::vector<Successor> successors_;
};

// A shrink as this rank computes it before joining the new group.
struct ShrinkPlan {
  std::string what;             // "shrink(exclude=[2])", for messages
  std::vector<int> survivors;   // old ranks in order: new rank k = survivors[k]
  int new_rank = -1;
  UniqueId id;                  // the new group's id (the lowest survivor's successor address)
  uint64_t digest = 0;          // hash of the survivor list, checked at the new group's join
  std::unique_ptr<bootstrap::RootServer> root;  // on the lowest survivor: the new group's root
};

// Checks `exclude` (ranks in range, not this rank) and, on the lowest survivor, starts the new
// group's root on its reserved listener. Throws InvalidArgument on this rank only. `lost`: the
// ranks this group's root reported lost (AbortSignal::lost()), excluded as well: a survivor list
// that held a dead rank would wait for it until the join timeout.
ShrinkPlan plan_shrink(Member& m, int rank, int world, const std::vector<int>& exclude,
                       const std::vector<int>& lost = {});
// The new group formed: its root is kept as long as the process (or until every rank left).
void finish_shrink(Member& m, ShrinkPlan& p);
// Runs `join` (which builds the new group with the deadline and the abort signal it is given)
// until it succeeds, or fails with the error translated by rethrow_shrink_failure. A refusal by
// a root of another survivor list on the same address is retried until `join_timeout` passes.
// `old` is this group's signal: a survivor whose loss its root reports meanwhile (it died before
// or while joining) ends the join at once, naming it, rather than at the join timeout.
void join_shrunk(const ShrinkPlan& p, int rank, std::chrono::milliseconds join_timeout, AbortSignal& old,
                 const std::function<void(std::chrono::milliseconds, std::shared_ptr<AbortSignal>)>& join);
// A shrink whose join failed: the same error, said in terms of this group's ranks (the culprit
// is the old rank; -1 there means the root's host, the lowest survivor). Its culprits() are the
// failure's, in old ranks, and every rank in `lost` (this group's known losses).
[[noreturn]] void rethrow_shrink_failure(const ShrinkPlan& p, const Error& e, int rank,
                                         const std::vector<int>& lost = {});
// Why the old group's later calls fail once it has been shrunk.
std::string revoke_reason(const ShrinkPlan& p);

// A new, single-use id whose root this process hosts, on the interface of this rank's
// successor listener (reachable by the group's ranks).
UniqueId grow_id(const Member& m);
// grow's agreement over the current group (one bootstrap all-gather): every rank's target size,
// new rank and id (from the ranks that pass one). Throws InvalidArgument on every rank alike when
// they disagree or no rank passed an id. Returns the id and this rank's new rank.
std::pair<UniqueId, int> agree_grow(Bootstrap& bs, int rank, int world, int new_world, const std::optional<UniqueId>& id,
                                    int new_rank, Deadline deadline);

}  // namespace actorcc::elastic
