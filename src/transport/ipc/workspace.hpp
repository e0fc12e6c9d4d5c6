// SharedWorkspace: one device-memory region per rank, mapped into every local peer's address
// space. Built collectively (every rank of the group calls create with the same size):
//   1. each rank allocates its region with cuMemCreate (POSIX-fd handle type), zeroes it,
//      exports a descriptor and listens on an abstract Unix socket named after the group tag
//      and its rank;
//   2. bootstrap all-gather "ready" (or the reason it failed);
//   3. each rank connects to every local peer and sends {magic, group tag, src, dst, size} +
//      the descriptor; it accepts one connection per peer, checks the header (tag, ranks,
//      size, no duplicates), imports, maps and grants its own device access;
//   4. bootstrap all-gather of the import result; a failed import anywhere (no P2P path, VMM
//      not supported) makes every rank fall back to legacy cudaIpc handles (all-gathered),
//      and if that fails too every rank throws UnsupportedError with the reasons.
// The decisions depend only on all-gathered results, so every rank makes the same number of
// bootstrap calls whatever failed where.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "group/group_context.hpp"
#include "transport/ipc/vmm.hpp"

namespace actorcc::ipc {

class SharedWorkspace {
 public:
  static std::unique_ptr<SharedWorkspace> create(GroupContext& ctx, int device, size_t bytes);
  ~SharedWorkspace();

  void* local() const { return local_; }
  void* peer(int rank) const { return peers_[rank]; }  // local() for this rank
  size_t size() const { return size_; }
  const std::string& mode() const { return mode_; }    // "vmm" or "cudaipc"

 private:
  SharedWorkspace() = default;
  std::string mode_;
  size_t size_ = 0;
  void* local_ = nullptr;
  std::vector<void*> peers_;
  VmmRegion vmm_local_;
  std::vector<VmmRegion> vmm_peers_;
  LegacyRegion legacy_local_;
  std::vector<LegacyRegion> legacy_peers_;
};

}  // namespace actorcc::ipc
