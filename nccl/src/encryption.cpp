// ncclSetEncryption (2.32): process-wide TLS for NCCL's own TCP sockets. actorcc's bootstrap
// authenticates its joins (a MAC keyed by ACTORCC_BOOTSTRAP_SECRET, docs/design.md) but encrypts
// nothing, so a request for encryption is refused, as NCCL refuses it when built without TLS
// ("NCCL returns an error rather than continuing without encryption"); plaintext (mode NONE, the
// initializer's) is what the library does anyway.
#include <cstddef>
#include <cstring>

#include "comm.hpp"

using namespace actorcc::ncclabi;

extern "C" ncclResult_t ncclSetEncryption(const ncclEncryptionConfig_t* config) {
  const char* fn = "ncclSetEncryption: ";
  if (!config) return set_error(nullptr, ncclInvalidArgument, std::string(fn) + "config is NULL");
  ncclEncryptionConfig_t c{};
  std::memcpy(&c, config, offsetof(ncclEncryptionConfig_t, mode));
  if (c.magic != kNcclConfigMagic)
    return set_error(nullptr, ncclInvalidArgument,
                     std::string(fn) + "config has a wrong magic: initialise it with NCCL_ENCRYPTION_CONFIG_INITIALIZER");
  if (c.size < sizeof c) return set_error(nullptr, ncclInvalidArgument, std::string(fn) + "config size " + std::to_string(c.size) + " is smaller than ncclEncryptionConfig_t");
  std::memcpy(&c, config, sizeof c);
  if (c.mode == 0 && !c.psk) return ncclSuccess;
  return set_error(nullptr, ncclInvalidUsage,
                   std::string(fn) + "encryption (mode " + std::to_string(c.mode) +
                       ") is not available: actorcc's TCP connections are authenticated, not encrypted");
}
ACTORCC_NCCL_ALIAS(ncclSetEncryption)
