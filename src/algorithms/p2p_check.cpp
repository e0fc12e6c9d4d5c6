#include "algorithms/p2p_check.hpp"

namespace actorcc {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void add(P2PSide& s, const P2POp& op) {
  ++s.ops;
  s.bytes += op.count * dtype_size(op.dtype);
  s.hash = mix(s.hash ^ mix(op.count * 16 + static_cast<uint64_t>(op.dtype) + 1));
}

std::string side(const P2PSide& s) {
  return std::to_string(s.ops) + " transfer(s) of " + std::to_string(s.bytes) + " bytes in all";
}

}  // namespace

std::vector<P2PPeerSummary> summarize_transfers(const std::vector<P2POp>& ops, int world) {
  std::vector<P2PPeerSummary> s(static_cast<size_t>(world));
  for (const P2POp& op : ops) {
    P2PPeerSummary& p = s[static_cast<size_t>(op.peer)];
    add(op.kind == P2POp::Kind::Send ? p.sends : p.recvs, op);
  }
  return s;
}

std::vector<int> transfer_peers(const std::vector<P2PPeerSummary>& s, int rank) {
  std::vector<int> peers;
  for (size_t q = 0; q < s.size(); ++q)
    if (static_cast<int>(q) != rank && (s[q].sends.ops || s[q].recvs.ops)) peers.push_back(static_cast<int>(q));
  return peers;
}

std::string transfer_disagreement(const P2PPeerSummary& mine, const P2PPeerSummary& theirs, int rank, int peer) {
  const std::string r = "rank " + std::to_string(rank), q = "rank " + std::to_string(peer);
  if (!(theirs.sends == mine.recvs))
    return q + " sends " + side(theirs.sends) + " to " + r + ", which receives " + side(mine.recvs) + " from it" +
           (theirs.sends.ops == mine.recvs.ops && theirs.sends.bytes == mine.recvs.bytes
                ? " (the counts or dtypes differ)"
                : "");
  if (!(theirs.recvs == mine.sends))
    return r + " sends " + side(mine.sends) + " to " + q + ", which receives " + side(theirs.recvs) + " from it" +
           (theirs.recvs.ops == mine.sends.ops && theirs.recvs.bytes == mine.sends.bytes
                ? " (the counts or dtypes differ)"
                : "");
  return "";
}

}  // namespace actorcc
