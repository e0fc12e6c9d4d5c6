// libFuzzer target: the peer descriptor every rank receives from every other in WELCOME.
// Properties: decode() throws only InvalidArgument and never reads out of bounds; a decoded
// descriptor survives an encode/decode round trip.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "actorcc/error.hpp"
#include "topology/topology.hpp"

using namespace actorcc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string blob(reinterpret_cast<const char*>(data), size);
  try {
    PeerInfo p = topology::decode(blob);
    PeerInfo q = topology::decode(topology::encode(p));
    if (q.rank != p.rank || q.host_id != p.host_id || q.hostname != p.hostname || q.pid != p.pid ||
        q.gpu_uuid != p.gpu_uuid || q.pci_bus_id != p.pci_bus_id || q.visible_devices != p.visible_devices ||
        q.version != p.version)
      std::abort();
  } catch (const InvalidArgument&) {
  }
  return 0;
}
