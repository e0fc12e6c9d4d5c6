// CallDesc: what every rank of a group must agree on for one collective call (collective, count,
// dtype, op, root), in a fixed 16-byte form that the protocols carry with data they already
// exchange, so ranks that disagree are caught on every call at no extra round trip (the CPU
// backend's shm step words: transport/shm/shm_group.hpp; the frames between nodes of the
// hierarchical CPU backend: transport/tcp/frame.hpp). Checked mode (Options::checked) is the
// exhaustive check over the bootstrap; this one is always on.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "group/group_context.hpp"

namespace actorcc {

struct CallDesc {
  uint64_t count = 0;
  int32_t root = 0;
  uint8_t coll = 0, dtype = 0, op = 0, valid = 0;

  // The fields that matter for a.coll: op only for reductions, root only for rooted calls,
  // count and dtype not for the barrier (so callers' unused fields never make a mismatch).
  static CallDesc of(const CollArgs& a);
  bool operator==(const CallDesc& o) const {
    return count == o.count && root == o.root && coll == o.coll && dtype == o.dtype && op == o.op && valid == o.valid;
  }
  bool operator!=(const CallDesc& o) const { return !(*this == o); }
  // "all_reduce(count=4096, float32, sum)", "broadcast(count=8, int32, root=1)", "barrier()".
  std::string text() const;
};
static_assert(sizeof(CallDesc) == 16, "CallDesc is stored as two 64-bit words");

// Whom a disagreement is blamed on. The rank that finds it is as often in the majority as not,
// so naming "the other side" of the first pair compared would blame the majority half the
// time; instead every rank that decides from the same calls names the same rank: the lowest
// rank outside the majority (the call most ranks made). Where calls tie for the most ranks, the
// one made by the lowest rank counts as the majority's (as checked mode compares with rank 0),
// and the text says that it is a tie.
struct MismatchVerdict {
  int culprit = -1;
  bool tie = false;
  // "rank 2 called X, ranks 0, 1 called Y": every other call first, the majority's last.
  std::string text;
};
// calls: (rank, its call's text), in any order; at least two different texts.
MismatchVerdict mismatch_verdict(std::vector<std::pair<int, std::string>> calls);

}  // namespace actorcc
