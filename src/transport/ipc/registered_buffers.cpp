#include "transport/ipc/registered_buffers.hpp"

#include <cuda_runtime.h>

#include <cstring>
#include <sstream>

#include "actorcc/error.hpp"
#include "bootstrap/outcomes.hpp"
#include "common/deadline.hpp"
#include "common/log.hpp"
#include "transport/ipc/driver_api.hpp"
#include "transport/ipc/hex.hpp"

namespace actorcc::ipc {

std::shared_ptr<LegacyRegion> RegisteredBuffers::open(int rank, const std::string& handle, size_t size) {
  auto key = std::make_pair(rank, handle);
  if (auto it = opened_.find(key); it != opened_.end())
    if (auto live = it->second.lock()) return live;
  auto region = std::make_shared<LegacyRegion>(LegacyRegion::open(handle.data(), size));
  opened_[key] = region;
  return region;
}

void RegisteredBuffers::add(GroupContext& ctx, void* ptr, size_t bytes) {
  const int me = ctx.rank, W = ctx.world;
  const Deadline dl = Deadline::after(ctx.options.timeout);
  char* p = static_cast<char*>(ptr);
  // 1. This rank's buffer: overlap with an entry (a caller error), or its allocation's handle.
  std::string status = "ok", mine;
  for (const auto& e : entries_)
    if (p < e.local + e.bytes && e.local < p + bytes) status = "bad", mine = "the buffer overlaps a registered one";
  if (status == "ok") {
    try {
      const auto& d = DriverApi::get();
      if (!d.ok) throw CudaError("CUDA driver API unavailable: " + d.error);
      CUdeviceptr base = 0;
      size_t size = 0;
      d.check(d.cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(ptr)), "cuMemGetAddressRange");
      if (reinterpret_cast<CUdeviceptr>(p + bytes) > base + size) throw CudaError("the range runs past its allocation");
      cudaIpcMemHandle_t h;
      cudaError_t e = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base));
      if (e != cudaSuccess) {
        cudaGetLastError();
        throw CudaError(std::string("cudaIpcGetMemHandle: ") + cudaGetErrorString(e) +
                        " (not cudaMalloc memory, e.g. a VMM or expandable segment)");
      }
      std::ostringstream os;
      os << to_hex(&h, sizeof h) << ' ' << (reinterpret_cast<CUdeviceptr>(ptr) - base) << ' ' << size;
      mine = os.str();
    } catch (const std::exception& e) {
      status = "no", mine = Outcomes::reason(e);
    }
  }
  const auto all = Outcomes::gather(*ctx.bootstrap, status, mine, dl);
  if (auto bad = all.reasons("bad"); !bad.empty())
    throw InvalidArgument("register_buffer failed on " + bad, me);
  Entry en;
  en.id = next_id_++;
  en.local = p;
  en.bytes = bytes;
  en.peer.assign(W, nullptr);
  en.peer[me] = p;
  std::string why = all.reasons("no");
  // 2. Map every peer's allocation; all-gather the outcome so every rank agrees on `usable`.
  if (why.empty()) {
    std::string opened;
    try {
      for (int q = 0; q < W; ++q) {
        if (q == me) continue;
        std::istringstream is(all.text(q));
        std::string hex;
        size_t off = 0, size = 0;
        is >> hex >> off >> size;
        std::string handle(sizeof(cudaIpcMemHandle_t), '\0');
        if (!from_hex(hex, handle.data(), handle.size()))
          throw SystemError("malformed cudaIpc handle from rank " + std::to_string(q));
        auto region = open(q, handle, size);
        en.peer[q] = static_cast<char*>(region->ptr()) + off;
        en.maps.push_back(std::move(region));
      }
    } catch (const std::exception& e) {
      opened = Outcomes::reason(e);
    }
    why = Outcomes::gather_error(*ctx.bootstrap, opened, dl).reasons();
  }
  en.usable = why.empty();
  if (!en.usable) {
    en.maps.clear();
    en.peer.assign(W, nullptr);
    if (me == 0)
      LOG_WARN("rank 0: registered buffer #" << en.id << " cannot be mapped by every rank, so calls on it use the "
                                             << "workspace path: " << why);
  }
  entries_.push_back(std::move(en));
}

void RegisteredBuffers::remove(GroupContext& ctx, void* ptr) {
  const int me = ctx.rank;
  size_t k = 0;
  while (k < entries_.size() && entries_[k].local != ptr) ++k;
  const std::string error = k < entries_.size() ? "" : "the pointer is not a registered buffer";
  const auto all = Outcomes::gather_error(*ctx.bootstrap, error, Deadline::after(ctx.options.timeout));
  if (!all.all_ok())
    throw InvalidArgument("deregister_buffer failed on " + all.reasons(), me);
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(k));
}

const RegisteredBuffers::Entry* RegisteredBuffers::find(const void* p, size_t bytes) const {
  const char* c = static_cast<const char*>(p);
  for (const auto& e : entries_)
    if (e.usable && c >= e.local && c + bytes <= e.local + e.bytes) return &e;
  return nullptr;
}

}  // namespace actorcc::ipc
