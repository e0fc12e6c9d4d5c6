// Buffers registered with a CUDA communicator (Communicator::register_buffer): each rank's
// buffer is mapped into every peer through the legacy cudaIpc handle of the allocation that
// holds it, so a kernel can write a peer's output directly (the pipelined two-shot's all-gather
// then needs no copy out of the workspace).
//
// Registration and deregistration are collective: every rank calls them in the same order, so
// entry k means the same logical buffer on every rank. Each call all-gathers {handle, offset of
// the buffer in its allocation, size} (or the reason it cannot be shared: memory that is not
// from cudaMalloc, e.g. a VMM/expandable segment), so every rank keeps the same entries and
// agrees on whether entry k is usable. A peer allocation opened for several entries is opened
// once (cudaIpcOpenMemHandle refuses a second mapping) and closed with its last entry.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "group/group_context.hpp"
#include "transport/ipc/vmm.hpp"

namespace actorcc::ipc {

class RegisteredBuffers {
 public:
  struct Entry {
    uint64_t id = 0;            // registration number, the same on every rank
    char* local = nullptr;      // this rank's buffer
    size_t bytes = 0;
    bool usable = false;        // every rank's buffer could be mapped here
    std::vector<char*> peer;    // peer[r]: rank r's buffer mapped here (peer[rank] = local)
    std::vector<std::shared_ptr<LegacyRegion>> maps;  // the peer allocations this entry holds
  };

  // Collective. Throws InvalidArgument for an overlap with a registered buffer (on every rank
  // that sees one, after the all-gather, so no rank is left waiting).
  void add(GroupContext& ctx, void* ptr, size_t bytes);
  // Collective. A pointer that was never registered is an InvalidArgument (on every rank).
  void remove(GroupContext& ctx, void* ptr);
  // The usable entry holding [p, p + bytes) on this rank, or nullptr.
  const Entry* find(const void* p, size_t bytes) const;

 private:
  std::shared_ptr<LegacyRegion> open(int rank, const std::string& handle, size_t size);
  std::vector<Entry> entries_;
  uint64_t next_id_ = 1;
  std::map<std::pair<int, std::string>, std::weak_ptr<LegacyRegion>> opened_;
};

}  // namespace actorcc::ipc
