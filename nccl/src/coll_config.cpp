// ncclCollConfig_t, the per-call config of 2.31's nccl*Config collectives, read as NCCL reads it:
// by the caller's `size` and `version` (2.31.2: 64 bytes; 2.32.3: 72, adding
// launchCompletionEvent). What applies to actorcc is honoured; NCCL's kernel tuning does not.
//   minCTAs, maxCTAs, nvlsCTAs, cgaClusterSize, CTAPolicy: NCCL's CTA and cluster counts; actorcc's
//     kernels size themselves (checked for range as NCCL checks them, then unused).
//   algSelection, forceAlgSelection: NCCL's algorithm names (ring, tree, nvls, ...); actorcc runs
//     its own algorithms, so a selection is accepted and not applied (it changes speed, never the
//     result).
//   userProfilerTag, ext: for NCCL's profiler plug-ins and vendor libraries; NCCL ignores ext too.
//   launchCompletionEvent: recorded on the call's stream once the call is issued.
#include <cstddef>
#include <cstring>

#include "comm.hpp"

namespace actorcc::ncclabi {

namespace {
constexpr unsigned kCollConfigSince = 23100;      // 2.31.0 introduced the struct
constexpr unsigned kCompletionEventSince = 23200;  // 2.32
// The smallest struct NCCL takes: 2.31.2's, ending after userProfilerTag.
constexpr size_t kMinSize = offsetof(ncclCollConfig_t, launchCompletionEvent);

template <typename T>
T field(const ncclCollConfig_t* cfg, size_t offset) {
  T v;
  std::memcpy(&v, reinterpret_cast<const char*>(cfg) + offset, sizeof v);
  return v;
}
}  // namespace

std::string read_coll_config(const ncclCollConfig_t* cfg, CollCall* call) {
  if (!cfg) return {};
  const auto size = field<size_t>(cfg, 0);
  const auto magic = field<unsigned>(cfg, offsetof(ncclCollConfig_t, magic));
  const auto version = field<unsigned>(cfg, offsetof(ncclCollConfig_t, version));
  if (size < kMinSize)
    return "config size " + std::to_string(size) + " is smaller than any ncclCollConfig_t (" +
           std::to_string(kMinSize) + " bytes): initialise it with NCCL_COLLCONFIG_INITIALIZER";
  if (magic != kNcclConfigMagic)
    return "config has a wrong magic: initialise it with NCCL_COLLCONFIG_INITIALIZER";
  if (version < kCollConfigSince)
    return "config version " + std::to_string(version) + " is older than ncclCollConfig_t (2.31)";
  const int force = field<int>(cfg, offsetof(ncclCollConfig_t, forceAlgSelection));
  if (force != 0 && force != 1) return "config.forceAlgSelection is " + std::to_string(force) + " (0 or 1)";
  const int policy = field<int>(cfg, offsetof(ncclCollConfig_t, CTAPolicy));
  if (policy != kNcclConfigUndefInt && (policy < 0 || policy > 3))
    return "config.CTAPolicy is " + std::to_string(policy) + " (unset or NCCL_CTA_POLICY_* bits, 0 to 3)";
  if (size >= sizeof(ncclCollConfig_t) && version >= kCompletionEventSince)
    call->done_event = field<void*>(cfg, offsetof(ncclCollConfig_t, launchCompletionEvent));
#if !ACTORCC_WITH_CUDA
  if (call->done_event) return "config.launchCompletionEvent is set, but this build of the library has no CUDA";
#endif
  return {};
}

}  // namespace actorcc::ncclabi
