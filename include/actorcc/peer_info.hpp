// PeerInfo: what the topology layer learnt about one rank (identical on every rank).
#pragma once
#include <cstdint>
#include <string>

namespace actorcc {

struct PeerInfo {
  int rank = -1;
  std::string host_id;    // hostname + boot id, or ACTORCC_NODE_ID
  std::string hostname;
  int32_t pid = 0;
  std::string gpu_uuid;   // "" when the rank has no GPU
  std::string pci_bus_id; // "0000:18:00.0" style, "" when none
  int node = -1;          // index of the node (by first appearance in rank order)
  int local_rank = -1;    // index among the ranks on the same node
  std::string visible_devices;  // CUDA_VISIBLE_DEVICES as the rank saw it ("(unset)" if unset)
  std::string version;    // actorcc version string
};

}  // namespace actorcc
