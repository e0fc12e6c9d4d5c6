// ncclConfig_t read as NCCL reads it: the caller's struct has the layout of the header it was
// built with (48 bytes for 2.18-2.26, 72 for 2.27, 80 for 2.28, 88 for 2.29, 96 for 2.30, 112 for
// 2.31, 120 for 2.32), so a field counts only if it lies inside the caller's `size` and its release
// is not newer than the caller's `version`; every other field is unset.
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "comm.hpp"

namespace actorcc::ncclabi {

namespace {
// NCCL_VERSION(X,Y,Z) as the header computes it (the pre-2.9 form below 2.9).
constexpr int release(int x, int y, int z) { return (x <= 2 && y <= 8) ? x * 1000 + y * 100 + z : x * 10000 + y * 100 + z; }

// The first release that has each field we read.
constexpr int kBlockingSince = release(2, 14, 0);
constexpr int kCommNameSince = release(2, 27, 0);

template <typename T>
bool has_field(const ncclConfig_t* cfg, size_t offset, int since) {
  return cfg->size >= offset + sizeof(T) && static_cast<int>(cfg->version) >= since;
}
}  // namespace

std::string read_config(const ncclConfig_t* cfg, CommConfig* out) {
  *out = CommConfig{};
  if (!cfg) return {};
  // size, magic and version are read first: every layout starts with them.
  size_t size = 0;
  unsigned magic = 0, version = 0;
  std::memcpy(&size, cfg, sizeof size);
  std::memcpy(&magic, reinterpret_cast<const char*>(cfg) + offsetof(ncclConfig_t, magic), sizeof magic);
  std::memcpy(&version, reinterpret_cast<const char*>(cfg) + offsetof(ncclConfig_t, version), sizeof version);
  if (magic != kNcclConfigMagic) {
    char b[16];
    std::snprintf(b, sizeof b, "%x", magic);
    return std::string("config has a wrong magic (0x") + b + ", expected 0xcafebeef): initialise it with NCCL_CONFIG_INITIALIZER";
  }
  if (size < offsetof(ncclConfig_t, blocking) + sizeof(int))
    return "config size " + std::to_string(size) + " is smaller than any ncclConfig_t";
  (void)version;
  if (has_field<int>(cfg, offsetof(ncclConfig_t, blocking), kBlockingSince)) {
    const int b = cfg->blocking;
    if (b != kNcclConfigUndefInt) {
      if (b != 0 && b != 1) return "config.blocking is " + std::to_string(b) + " (0 or 1)";
      out->blocking = b == 1;
    }
  }
  if (has_field<const char*>(cfg, offsetof(ncclConfig_t, commName), kCommNameSince) && cfg->commName)
    out->name = cfg->commName;
  return {};
}

ncclResult_t parse_config(const ncclConfig_t* cfg, CommConfig* out, const char* fn) noexcept {
  try {
    const std::string problem = read_config(cfg, out);
    if (problem.empty()) return ncclSuccess;
    return set_error(nullptr, ncclInvalidArgument, std::string(fn) + ": " + problem);
  } catch (...) {
    return fail_current(nullptr, fn);
  }
}

}  // namespace actorcc::ncclabi
