// Bootstrap: the TCP control network of one group. A rank joins through the root named by the
// UniqueId (token-authenticated, version/world/rank checked), receives every rank's blob, and
// afterwards uses the root for small all-gathers, barriers and abort broadcast. A reader thread
// watches the connection: an abort from any rank, a rank that vanished (EOF at the root) or the
// root itself vanishing raises the AbortSignal with the culprit's rank.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actorcc/unique_id.hpp"
#include "common/abort_signal.hpp"
#include "common/deadline.hpp"

namespace actorcc {

class Bootstrap {
 public:
  // Connects (retrying until `join_deadline` while the root is not up yet), authenticates and
  // waits for all `world` ranks. Throws TimeoutError listing the missing ranks, InvalidArgument
  // for a rejected join (duplicate rank, rank >= world, world mismatch, bad token, version).
  static std::unique_ptr<Bootstrap> join(const UniqueId& id, int rank, int world, const std::string& self_blob,
                                         Deadline join_deadline, std::shared_ptr<AbortSignal> abort);
  virtual ~Bootstrap() = default;  // says goodbye to the root (a clean leave is not a failure)

  // The checks join() makes before it connects (the id's fields and version, rank and world),
  // for a caller that validates everything locally first: throws InvalidArgument naming what is
  // wrong, a corrupt id included.
  static void check_join(const UniqueId& id, int rank, int world);
  // Tells the root of `id` that this process will not join as `rank` of `world` (a mistake it
  // found itself: `reason`), so the ranks waiting fail at once naming it, and so do ranks that
  // come later, until `join_deadline`. Best effort, bounded by a few seconds; silent where the
  // id is unreadable or its root cannot be reached.
  static void refuse(const UniqueId& id, int rank, int world, const std::string& reason,
                     Deadline join_deadline) noexcept;

  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Every rank's self_blob from join(), indexed by rank.
  virtual const std::vector<std::string>& peer_blobs() const = 0;

  // Collective over all ranks, in call order. Throw on deadline (naming the ranks that have
  // not arrived, as reported by the root) or when the AbortSignal is raised.
  virtual std::vector<std::string> allgather(const std::string& blob, Deadline deadline) = 0;
  virtual void barrier(Deadline deadline) = 0;

  // Tells every other rank (through the root) that this rank aborts; raises locally too.
  // `culprit` is the rank at fault as this rank knows it (the one its wait timed out on, the
  // peer whose connection broke); -1 (or out of range) means this rank itself. Every rank's
  // error then carries it as culprit(), the text naming this rank as the one that aborted.
  virtual void abort(const std::string& reason, int culprit = -1) = 0;

  // A clean leave of another rank, as the root reports it: `rank` closed its communicator
  // after issuing `collectives` collective calls, so any later collective call of the group
  // can never complete.
  struct Departure {
    int rank = -1;
    uint64_t collectives = 0;
  };
  // `listener` runs on the bootstrap's reader thread for every departure, those reported
  // before this call included (replayed at once). One listener; it must outlive the bootstrap.
  virtual void on_departure(std::function<void(const Departure&)> listener) = 0;
  // The count this rank's own clean leave reports (its communicator sets it before it goes).
  virtual void set_collectives(uint64_t n) = 0;
  // The rank whose process hosts the root, once the group learned it from the peer blobs (the
  // UniqueId names it only on the from_address path and for a shrunk group): the loss of the
  // root then names that rank, as the loss of any rank does.
  virtual void set_root_host(int /*rank*/) {}
};

// Root server side (used by UniqueId::create and by rank 0 of Communicator::from_address).
// Starts a listener thread on exactly host:port (port 0 = any; host "" = ACTORCC_SOCKET_ADDR,
// else this host's first non-loopback IPv4) serving the group with a fresh random token. The
// root keeps serving until every rank of the group has left, the id is released unused
// (UniqueId::stop_root_if_unused) or the process exits.
UniqueId start_root(const std::string& host, uint16_t port, bool creator_is_rank0 = false);

// Builds the UniqueId for a root that rank 0 will start at host:port (from_address path): the
// token is a keyed hash of host, port and world under ACTORCC_BOOTSTRAP_SECRET, so every rank
// with the secret computes the same one and nobody else can. Without a secret only a loopback
// host is accepted (with a warning); another host throws InvalidArgument saying what to set.
UniqueId address_unique_id(const std::string& host, uint16_t port, int world);
// Starts a root for an id made by address_unique_id (rank 0 only), listening on exactly the
// id's address and refusing any other world size; throws SystemError if the port is taken.
void start_root_for(const UniqueId& id);

// The largest blob one rank may pass to allgather() in a group of `world`: the root sends all
// of them back in one frame, bounded by the wire's kMaxPayload.
size_t allgather_limit(int world);

}  // namespace actorcc
