#include "core/validate.hpp"

#include <limits>
#include <string>

namespace actorcc {
namespace {

[[noreturn]] void bad(int rank, const CollArgs& a, const std::string& why) {
  throw InvalidArgument("rank " + std::to_string(rank) + ": " + std::string(to_string(a.coll)) + ": " + why, rank);
}

}  // namespace

void validate_args(const CollArgs& a, int rank, int world) {
  if (a.coll == Collective::Barrier) return;
  if (static_cast<unsigned>(a.dtype) >= kNumDataTypes) bad(rank, a, "unsupported dtype " + std::to_string(int(a.dtype)));
  bool reduces = a.coll == Collective::AllReduce || a.coll == Collective::ReduceScatter;
  if (reduces && static_cast<unsigned>(a.op) >= kNumRedOps) bad(rank, a, "unsupported op " + std::to_string(int(a.op)));
  if (a.coll == Collective::Broadcast && (a.root < 0 || a.root >= world))
    bad(rank, a, "root " + std::to_string(a.root) + " is not a rank of this group of " + std::to_string(world));
  // The largest buffer a call touches is count * world elements (gather/scatter side).
  size_t esize = dtype_size(a.dtype);
  size_t span = (a.coll == Collective::AllGather || a.coll == Collective::ReduceScatter) ? static_cast<size_t>(world) : 1;
  if (a.count > std::numeric_limits<size_t>::max() / esize / span)
    bad(rank, a, "count " + std::to_string(a.count) + " overflows the byte size");
  if (a.count == 0) return;
  bool root_only_send = a.coll == Collective::Broadcast && rank != a.root;
  if (!a.send && !root_only_send) bad(rank, a, "send buffer is null with count " + std::to_string(a.count));
  if (!a.recv) bad(rank, a, "recv buffer is null with count " + std::to_string(a.count));
  uintptr_t misalign = (reinterpret_cast<uintptr_t>(a.send) | reinterpret_cast<uintptr_t>(a.recv)) % esize;
  if (misalign) bad(rank, a, "buffer not aligned to its " + std::to_string(esize) + "-byte element size");
}

}  // namespace actorcc
