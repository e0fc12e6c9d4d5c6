#include "transport/ipc/workspace.hpp"

#include <cuda_runtime.h>

#include <cstring>
#include <sstream>

#include "bootstrap/outcomes.hpp"
#include "common/log.hpp"
#include "transport/ipc/hex.hpp"
#include "transport/ipc/uds.hpp"

namespace actorcc::ipc {
namespace {

constexpr char kMagic[8] = {'A', 'C', 'C', 'I', 'P', 'C', '1', '\0'};

// What travels with each descriptor; the receiver checks all of it.
struct FdHeader {
  char magic[8];
  char tag[48];
  int32_t src = -1;
  int32_t dst = -1;
  uint64_t bytes = 0;
};

std::string socket_name(const std::string& tag, int rank) { return "actorcc/" + tag + "/ws/" + std::to_string(rank); }

// All-gathers `err` ("" = ok); returns the reasons of the ranks that failed ("" = none).
std::string gather_errors(GroupContext& ctx, const std::string& err, Deadline dl) {
  return Outcomes::gather_error(*ctx.bootstrap, err, dl).reasons();
}

void zero(void* p, size_t n) {
  cudaError_t e = cudaMemset(p, 0, n);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw CudaError(std::string("zeroing the workspace: ") + cudaGetErrorString(e));
  }
}

}  // namespace

SharedWorkspace::~SharedWorkspace() {
  // Peers' mappings first, then our own allocation (each owner frees in its destructor).
  vmm_peers_.clear();
  legacy_peers_.clear();
}

std::unique_ptr<SharedWorkspace> SharedWorkspace::create(GroupContext& ctx, int device, size_t bytes) {
  std::unique_ptr<SharedWorkspace> ws(new SharedWorkspace());
  const int world = ctx.world, me = ctx.rank;
  ws->peers_.assign(world, nullptr);
  ws->vmm_peers_.resize(world);
  ws->legacy_peers_.resize(world);
  Deadline dl = Deadline::after(ctx.options.join_timeout);
  std::string why_vmm;

  // ---- 1. VMM allocation, export, listen --------------------------------------------------
  std::string err;
  UniqueFd myfd, listener;
  try {
    ws->vmm_local_ = VmmRegion::allocate(bytes, device);
    zero(ws->vmm_local_.ptr(), ws->vmm_local_.size());
    myfd = ws->vmm_local_.export_fd();
    listener = uds_listen(socket_name(ctx.group_tag, me));
  } catch (const std::exception& e) {
    err = std::string("VMM allocation/export: ") + e.what();
  }
  std::string bad = gather_errors(ctx, err, dl);
  if (bad.empty()) {
    // ---- 2. descriptor exchange and import ------------------------------------------------
    err.clear();
    size_t region = ws->vmm_local_.size();  // same size on every rank (same request, same granularity)
    try {
      std::vector<UniqueFd> conns;
      for (int p : ctx.local_ranks) {
        if (p == me) continue;
        UniqueFd c = uds_connect(socket_name(ctx.group_tag, p), dl);
        FdHeader h{};
        std::memcpy(h.magic, kMagic, sizeof kMagic);
        std::strncpy(h.tag, ctx.group_tag.c_str(), sizeof h.tag - 1);
        h.src = me;
        h.dst = p;
        h.bytes = region;
        uds_send(c.get(), &h, sizeof h, myfd.get());
        conns.push_back(std::move(c));  // kept open until every peer has read it
      }
      std::vector<UniqueFd> fds(world);
      for (size_t k = 1; k < ctx.local_ranks.size(); ++k) {
        UniqueFd c = uds_accept(listener.get(), dl);
        FdHeader h{};
        UniqueFd fd = uds_recv(c.get(), &h, sizeof h, dl.earliest(Deadline::after(kUdsHandshake)));
        if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || std::strncmp(h.tag, ctx.group_tag.c_str(), sizeof h.tag) != 0)
          throw SystemError("IPC exchange: a connection with a foreign group tag was rejected");
        if (h.dst != me || h.src < 0 || h.src >= world || h.src == me || fds[h.src].valid())
          throw SystemError("IPC exchange: bad or duplicate sender rank " + std::to_string(h.src));
        if (h.bytes != region)
          throw SystemError("IPC exchange: rank " + std::to_string(h.src) + " shares " + std::to_string(h.bytes) +
                            " bytes, expected " + std::to_string(region));
        if (!fd.valid()) throw SystemError("IPC exchange: rank " + std::to_string(h.src) + " sent no descriptor");
        fds[h.src] = std::move(fd);
      }
      for (int p : ctx.local_ranks) {
        if (p == me) continue;
        ws->vmm_peers_[p] = VmmRegion::import(fds[p].get(), region, device);
        ws->peers_[p] = ws->vmm_peers_[p].ptr();
      }
    } catch (const std::exception& e) {
      err = std::string("VMM import: ") + e.what();
    }
    bad = gather_errors(ctx, err, dl);
    if (bad.empty()) {
      ws->mode_ = "vmm";
      ws->size_ = region;
      ws->local_ = ws->vmm_local_.ptr();
      ws->peers_[me] = ws->local_;
      return ws;
    }
  }
  why_vmm = bad;
  LOG_WARN("rank " << me << ": VMM workspace sharing failed (" << why_vmm << "); trying legacy cudaIpc");

  // ---- 3. legacy cudaIpc fallback ---------------------------------------------------------
  listener.reset();
  myfd.reset();
  ws->vmm_peers_.clear();
  ws->vmm_peers_.resize(world);
  ws->vmm_local_.reset();
  std::fill(ws->peers_.begin(), ws->peers_.end(), nullptr);
  err.clear();
  std::string blob;
  try {
    ws->legacy_local_ = LegacyRegion::allocate(bytes);
    zero(ws->legacy_local_.ptr(), bytes);
    char h[64];
    ws->legacy_local_.handle(h);
    blob = to_hex(h, sizeof h);
  } catch (const std::exception& e) {
    err = Outcomes::reason(e);
  }
  const auto handles = Outcomes::gather_result(*ctx.bootstrap, err, blob, dl);
  const std::string fails = handles.reasons();
  err.clear();
  if (fails.empty()) {
    try {
      for (int p : ctx.local_ranks) {
        if (p == me) continue;
        char h[64];
        if (!from_hex(handles.text(p), h, sizeof h)) throw SystemError("malformed cudaIpc handle from rank " + std::to_string(p));
        ws->legacy_peers_[p] = LegacyRegion::open(h, bytes);
        ws->peers_[p] = ws->legacy_peers_[p].ptr();
      }
    } catch (const std::exception& e) {
      err = Outcomes::reason(e);
    }
  } else {
    err = "skipped";
  }
  bad = gather_errors(ctx, err, dl);
  if (!bad.empty() || !fails.empty())
    throw UnsupportedError("the local GPUs cannot map each other's memory (no P2P/NVLink path between them?). "
                           "VMM: " + why_vmm + ". cudaIpc: " + (fails.empty() ? bad : fails),
                           me);
  ws->mode_ = "cudaipc";
  ws->size_ = bytes;
  ws->local_ = ws->legacy_local_.ptr();
  ws->peers_[me] = ws->local_;
  return ws;
}

}  // namespace actorcc::ipc
