// Mesh: this rank's connected pairs (gloo's tcp::Context). Connections are set up over the
// group's bootstrap: every rank listens on the interface that routes to the bootstrap root,
// the listen addresses travel in one bootstrap all-gather, and then each pair of peers
// connects once, the lower rank dialling the higher (so waits only ever point upwards, and
// set-up cannot deadlock). Both ends authenticate each other's Hello with the group token.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"
#include "transport/tcp/pair.hpp"

namespace actorcc::tcp {

class Mesh {
 public:
  // Collective over every rank of `bs`. `peers` must be symmetric across ranks (q lists r
  // exactly when r lists q); a rank with no peers still takes part in the all-gather.
  // `toward` is the bootstrap root's address (it picks the interface to listen on).
  static std::unique_ptr<Mesh> connect(Bootstrap& bs, const wire::Token& token, const net::SockAddr& toward,
                                       const std::vector<int>& peers, Deadline deadline, const AbortSignal* abort);

  // The pair with `rank`; throws InvalidArgument when `rank` is not a peer.
  Pair& pair(int rank);
  int self() const { return self_; }
  std::vector<int> peers() const;

 private:
  Mesh(int self) : self_(self) {}
  int self_;
  std::map<int, std::unique_ptr<Pair>> pairs_;
};

}  // namespace actorcc::tcp
