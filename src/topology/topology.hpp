// Topology: who is where, without trusting device ordinals. A host is hostname + boot id
// (ACTORCC_NODE_ID overrides it, to make virtual nodes in tests); a GPU is its UUID and PCI bus
// id, read for the device this process uses whatever CUDA_VISIBLE_DEVICES says.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "actorcc/peer_info.hpp"

namespace actorcc::topology {

std::string host_id();   // ACTORCC_NODE_ID, else "<hostname>/<boot id>"
std::string hostname();

struct GpuIdentity {
  std::string uuid;        // "GPU-xxxxxxxx-..." ; empty when no usable GPU
  std::string pci_bus_id;  // "0000:18:00.0"
};
// Identity of CUDA device `ordinal` as this process numbers it (empty without CUDA).
GpuIdentity gpu_identity(int ordinal);

// This process's PeerInfo (rank filled in, node/local_rank left for assign_nodes).
PeerInfo local_peer_info(int rank, int device);

std::string encode(const PeerInfo& p);
PeerInfo decode(const std::string& blob);  // throws InvalidArgument on a malformed blob

// Fills node and local_rank: nodes numbered by first appearance in rank order, local ranks
// in rank order within a node. Returns the number of nodes.
int assign_nodes(std::vector<PeerInfo>& peers);

// The first two ranks (in rank order) that use the same GPU of the same host, or {-1, -1};
// with `same_process`, only two that are also one process. Ranks without a GPU share nothing.
std::pair<int, int> shared_gpu(const std::vector<PeerInfo>& peers, bool same_process = false);

}  // namespace actorcc::topology
