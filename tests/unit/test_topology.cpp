// Topology: peer-info wire form and node grouping, which decide who shares memory with whom.
#include <gtest/gtest.h>

#include <cstdlib>

#include "actorcc/error.hpp"
#include "topology/topology.hpp"

using namespace actorcc;

namespace {

PeerInfo peer(int rank, const std::string& host) {
  PeerInfo p;
  p.rank = rank;
  p.host_id = host;
  p.hostname = host;
  p.pid = 1000 + rank;
  p.gpu_uuid = "GPU-" + std::to_string(rank);
  p.pci_bus_id = "0000:0" + std::to_string(rank) + ":00.0";
  p.visible_devices = std::to_string(rank);
  p.version = "0.1.0";
  return p;
}

}  // namespace

TEST(Topology, PeerInfoRoundTrip) {
  PeerInfo p = peer(3, "hostA/boot");
  PeerInfo q = topology::decode(topology::encode(p));
  EXPECT_EQ(q.rank, 3);
  EXPECT_EQ(q.host_id, p.host_id);
  EXPECT_EQ(q.pid, p.pid);
  EXPECT_EQ(q.gpu_uuid, p.gpu_uuid);
  EXPECT_EQ(q.pci_bus_id, p.pci_bus_id);
  EXPECT_EQ(q.visible_devices, p.visible_devices);
}

TEST(Topology, MalformedPeerInfoIsRejected) {
  std::string blob = topology::encode(peer(1, "h"));
  for (size_t cut : {size_t(0), size_t(3), blob.size() / 2, blob.size() - 1})
    EXPECT_THROW(topology::decode(blob.substr(0, cut)), InvalidArgument) << "cut at " << cut;
  std::string wrong = blob;
  wrong[5] ^= 0x20;  // inside the version tag
  EXPECT_THROW(topology::decode(wrong), InvalidArgument);
}

TEST(Topology, NodesByFirstAppearanceAndLocalRanksInRankOrder) {
  // Interleaved placement: ranks 0,2,4 on B; 1,3 on A; 5 on C.
  std::vector<PeerInfo> peers = {peer(0, "B"), peer(1, "A"), peer(2, "B"), peer(3, "A"), peer(4, "B"), peer(5, "C")};
  EXPECT_EQ(topology::assign_nodes(peers), 3);
  int want_node[] = {0, 1, 0, 1, 0, 2};
  int want_local[] = {0, 0, 1, 1, 2, 0};
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(peers[r].node, want_node[r]) << "rank " << r;
    EXPECT_EQ(peers[r].local_rank, want_local[r]) << "rank " << r;
  }
}

TEST(Topology, SharedGpuIsTheFirstPairOnOneGpuOfOneHost) {
  auto on = [](int rank, const char* host, const char* gpu) {
    PeerInfo p = peer(rank, host);
    p.gpu_uuid = gpu;
    return p;
  };
  // Same UUID on two hosts (virtual nodes) and ranks without a GPU share nothing.
  std::vector<PeerInfo> peers = {on(0, "A", "GPU-1"), on(1, "B", "GPU-1"), on(2, "A", ""), on(3, "A", "")};
  EXPECT_EQ(topology::shared_gpu(peers), std::make_pair(-1, -1));
  peers.push_back(on(4, "B", "GPU-2"));
  peers.push_back(on(5, "A", "GPU-1"));
  peers.push_back(on(6, "B", "GPU-2"));
  EXPECT_EQ(topology::shared_gpu(peers), std::make_pair(0, 5));
  peers[5].gpu_uuid = "GPU-3";
  EXPECT_EQ(topology::shared_gpu(peers), std::make_pair(4, 6));
  // One process on one GPU (the CUDA backend refuses it even where sharing is allowed).
  for (auto& p : peers) p.pid = 100 + p.rank;
  EXPECT_EQ(topology::shared_gpu(peers, true), std::make_pair(-1, -1));
  peers[6].pid = peers[4].pid;
  EXPECT_EQ(topology::shared_gpu(peers, true), std::make_pair(4, 6));
  peers[5].gpu_uuid = "GPU-1";
  peers[5].pid = peers[0].pid;
  EXPECT_EQ(topology::shared_gpu(peers, true), std::make_pair(0, 5));
  peers[5].pid = 999;  // on GPU-1 with rank 0 but another process: only the plain pair
  EXPECT_EQ(topology::shared_gpu(peers, true), std::make_pair(4, 6));
  EXPECT_EQ(topology::shared_gpu(peers), std::make_pair(0, 5));
}

TEST(Topology, NodeIdOverrideMakesVirtualNodes) {
  setenv("ACTORCC_NODE_ID", "virtual7", 1);
  std::string a = topology::host_id();
  unsetenv("ACTORCC_NODE_ID");
  std::string b = topology::host_id();
  EXPECT_EQ(a, "node:virtual7");
  EXPECT_NE(a, b);
  EXPECT_NE(b.find('/'), std::string::npos) << "host id should be hostname/boot-id, got " << b;
}

TEST(Topology, LocalPeerInfoWithoutGpu) {
  PeerInfo p = topology::local_peer_info(2, -1);
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.pid, static_cast<int32_t>(getpid()));
  EXPECT_TRUE(p.gpu_uuid.empty());
}
