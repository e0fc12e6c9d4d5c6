// CallDesc: what every rank of a group must agree on for one collective call (collective, count,
// dtype, op, root), in a fixed 16-byte form that the protocols carry with data they already
// exchange, so ranks that disagree are caught on every call at no extra round trip (the CPU
// backend's shm step words: transport/shm/shm_group.hpp; the frames between nodes of the
// hierarchical CPU backend: transport/tcp/frame.hpp). Checked mode (Options::checked) is the
// exhaustive check over the bootstrap; this one is always on.
#pragma once
#include <cstdint>
#include <string>

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

}  // namespace actorcc
