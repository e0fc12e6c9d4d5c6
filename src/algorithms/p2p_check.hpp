// Whether the two ends of point-to-point transfers agree, for paths whose transport cannot tell
// (NCCL takes a send's and a receive's counts from each host and never compares them: a
// disagreement there hangs or corrupts). Each rank summarises, per peer, the transfers it sends
// to and receives from that peer, in issue order; the peers swap their summaries (16 x 2 words
// each way) and each end compares the other's sends with its receives and the other's receives
// with its sends, so both ends see a disagreement and name each other. Plain host code.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "actorcc/communicator.hpp"  // P2POp

namespace actorcc {

// What one direction of a pair carries: how many transfers, their bytes, and a hash of each
// one's (count, dtype) in order (so two sends of 4 and 8 differ from 8 and 4).
struct P2PSide {
  uint64_t ops = 0;
  uint64_t bytes = 0;
  uint64_t hash = 0;
  uint64_t reserved = 0;
  bool operator==(const P2PSide&) const = default;
};

// Rank r's summary for one peer q: what r sends to q, what r receives from q. This is what r
// sends to q (32 bytes on the wire, in this layout).
struct P2PPeerSummary {
  P2PSide sends;
  P2PSide recvs;
};
static_assert(sizeof(P2PPeerSummary) == 64, "the summary's wire size");

// Per peer (world entries) the summary of `ops`; peers with no transfer have ops == 0 both ways.
std::vector<P2PPeerSummary> summarize_transfers(const std::vector<P2POp>& ops, int world);

// Peers this rank exchanges with in `s` (some transfer either way), itself excluded.
std::vector<int> transfer_peers(const std::vector<P2PPeerSummary>& s, int rank);

// Compares this rank's summary for `peer` with the peer's summary for this rank; "" if they
// match, else what differs (naming both ranks).
std::string transfer_disagreement(const P2PPeerSummary& mine, const P2PPeerSummary& theirs, int rank, int peer);

}  // namespace actorcc
