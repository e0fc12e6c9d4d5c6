// ncclCommQueryProperties (2.29): what the communicator offers, written into the caller's
// ncclCommProperties_t by its size and version (the layouts are in abi.h). Honest values: rank,
// size and device as they are; NCCL's device API (symmetric memory, multimem, GIN, LSA teams, host
// RMA) is not served by this library (its kernels read NCCL's own structures: ncclDevCommCreate
// refuses), so those answer false / NONE / 0, and a client that checks them (JAX's capability
// check, nccl4py's Communicator.properties, nccl-tests' device kernels) keeps to the host API.
#include <climits>
#include <cstddef>
#include <cstring>

#include "comm.hpp"

namespace {
using namespace actorcc::ncclabi;

// NCCL's version cuts (dev_runtime.cc of 2.30.7 fills ginType, nLsaTeams, hostRmaSupport and
// railedGinType only above 2.29.3, where ginType became an int enum).
constexpr unsigned kPropertiesSince = 22902;  // 2.29.2 introduced the struct
constexpr unsigned kIntGinTypeSince = 22904;
constexpr unsigned kCommHashSince = 23100;
constexpr size_t kGinType8Offset = 34;  // 2.29.2-2.29.3: ncclGinType_t was a uint8_t enum here

// Writes `value` at `offset` when the caller's struct holds it.
template <typename T>
void put(ncclCommProperties_t* props, size_t size, size_t offset, T value) {
  if (offset + sizeof(T) <= size) std::memcpy(reinterpret_cast<char*>(props) + offset, &value, sizeof value);
}
}  // namespace

extern "C" ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  const char* fn = "ncclCommQueryProperties";
  ncclResult_t rc = ncclSuccess;
  actorcc::Communicator* c = ready_core(comm, fn, &rc);
  if (!c) return rc;
  if (!props) return set_error(comm, ncclInvalidArgument, std::string(fn) + ": " + rank_prefix(comm) + "props is NULL");
  size_t size;
  unsigned magic, version;
  std::memcpy(&size, props, sizeof size);
  std::memcpy(&magic, reinterpret_cast<const char*>(props) + offsetof(ncclCommProperties_t, magic), sizeof magic);
  std::memcpy(&version, reinterpret_cast<const char*>(props) + offsetof(ncclCommProperties_t, version), sizeof version);
  // NCCL's answer to a struct not made by NCCL_COMM_PROPERTIES_INITIALIZER.
  if (magic != kNcclConfigMagic)
    return set_error(comm, ncclInvalidUsage,
                     std::string(fn) + ": " + rank_prefix(comm) +
                         "props has a wrong magic: initialise it with NCCL_COMM_PROPERTIES_INITIALIZER");
  // NCCL refuses a version it has no layout for ("not backwards compatible").
  if (version < kPropertiesSince)
    return set_error(comm, ncclInvalidUsage,
                     std::string(fn) + ": " + rank_prefix(comm) + "props version " + std::to_string(version) +
                         " is older than ncclCommProperties_t (2.29.2): initialise it with "
                         "NCCL_COMM_PROPERTIES_INITIALIZER");
#define AT(field) offsetof(ncclCommProperties_t, field)
  put<int>(props, size, AT(rank), c->rank());
  put<int>(props, size, AT(nRanks), c->world_size());
  put<int>(props, size, AT(cudaDev), comm->cuda_device);
  put<int>(props, size, AT(nvmlDev), -1);  // the NVML index is never looked up here
  put<bool>(props, size, AT(deviceApiSupport), false);
  put<bool>(props, size, AT(multimemSupport), false);
  if (version < kIntGinTypeSince) {
    put<uint8_t>(props, size, kGinType8Offset, 0);  // NCCL_GIN_TYPE_NONE
    return ncclSuccess;
  }
  put<int>(props, size, AT(ginType), 0);
  put<int>(props, size, AT(nLsaTeams), 0);
  put<bool>(props, size, AT(hostRmaSupport), false);
  put<int>(props, size, AT(railedGinType), 0);
  if (version < kCommHashSince) return ncclSuccess;
  // No hash is kept that tells this communicator from another over the same ranks: 0, "none".
  put<uint64_t>(props, size, AT(commHash), 0);
  put<int>(props, size, AT(ginMinStride), INT_MAX);  // NCCL's value where GIN has no uniform stride
  put<int>(props, size, AT(ginConnectionType), 0);   // NCCL_GIN_CONNECTION_NONE
  for (size_t i = 0; i < sizeof props->ginSupport; ++i) put<uint8_t>(props, size, AT(ginSupport) + i, 0);
  put<size_t>(props, size, AT(devCommRuntimeVersionSize), 0);
#undef AT
  return ncclSuccess;
}
ACTORCC_NCCL_ALIAS(ncclCommQueryProperties)
