// GPU identity from the CUDA runtime: UUID and PCI bus id of the device as this process numbers
// it. Both name the physical GPU, so they are the same whatever CUDA_VISIBLE_DEVICES maps.
#include <cuda_runtime.h>

#include <cstdio>

#include "topology/topology.hpp"

namespace actorcc::topology {

GpuIdentity gpu_identity(int ordinal) {
  GpuIdentity g;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return g;
  }
  char uuid[64];
  const auto* b = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  g.uuid = uuid;
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) == cudaSuccess) g.pci_bus_id = bus;
  else cudaGetLastError();
  return g;
}

}  // namespace actorcc::topology
