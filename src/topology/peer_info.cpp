// PeerInfo wire form: a sequence of length-prefixed fields, versioned by a leading tag, so a
// rank running another actorcc version is rejected with a clear message rather than misread.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "actorcc/error.hpp"
#include "common/env.hpp"
#include "topology/topology.hpp"

namespace actorcc::topology {
namespace {

constexpr const char* kTag = "actorcc-peer/1";

void put(std::string& out, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += s;
}

std::string take(const std::string& in, size_t& pos) {
  if (pos + 4 > in.size()) throw InvalidArgument("malformed peer info (truncated length)");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<uint8_t>(in[pos + i])) << (8 * i);
  pos += 4;
  if (pos + n > in.size()) throw InvalidArgument("malformed peer info (truncated field)");
  std::string s = in.substr(pos, n);
  pos += n;
  return s;
}

}  // namespace

PeerInfo local_peer_info(int rank, int device) {
  PeerInfo p;
  p.rank = rank;
  p.host_id = host_id();
  p.hostname = hostname();
  p.pid = static_cast<int32_t>(getpid());
  if (device >= 0) {
    GpuIdentity g = gpu_identity(device);
    p.gpu_uuid = g.uuid;
    p.pci_bus_id = g.pci_bus_id;
  }
  auto cvd = env::get("CUDA_VISIBLE_DEVICES");
  p.visible_devices = cvd ? *cvd : "(unset)";
  p.version = ACTORCC_VERSION;
  return p;
}

std::string encode(const PeerInfo& p) {
  std::string out;
  put(out, kTag);
  put(out, std::to_string(p.rank));
  put(out, p.host_id);
  put(out, p.hostname);
  put(out, std::to_string(p.pid));
  put(out, p.gpu_uuid);
  put(out, p.pci_bus_id);
  put(out, p.visible_devices);
  put(out, p.version);
  return out;
}

PeerInfo decode(const std::string& blob) {
  size_t pos = 0;
  if (take(blob, pos) != kTag) throw InvalidArgument("peer info from an incompatible actorcc version");
  PeerInfo p;
  p.rank = std::atoi(take(blob, pos).c_str());
  p.host_id = take(blob, pos);
  p.hostname = take(blob, pos);
  p.pid = std::atoi(take(blob, pos).c_str());
  p.gpu_uuid = take(blob, pos);
  p.pci_bus_id = take(blob, pos);
  p.visible_devices = take(blob, pos);
  p.version = take(blob, pos);
  return p;
}

int assign_nodes(std::vector<PeerInfo>& peers) {
  std::map<std::string, int> node_of;
  std::map<int, int> next_local;
  for (auto& p : peers) {
    auto [it, fresh] = node_of.emplace(p.host_id, static_cast<int>(node_of.size()));
    p.node = it->second;
    p.local_rank = next_local[p.node]++;
  }
  return static_cast<int>(node_of.size());
}

std::pair<int, int> shared_gpu(const std::vector<PeerInfo>& peers, bool same_process) {
  for (size_t r = 0; r < peers.size(); ++r)
    for (size_t q = r + 1; q < peers.size(); ++q)
      if (!peers[r].gpu_uuid.empty() && peers[r].gpu_uuid == peers[q].gpu_uuid && peers[r].host_id == peers[q].host_id &&
          (!same_process || peers[r].pid == peers[q].pid))
        return {static_cast<int>(r), static_cast<int>(q)};
  return {-1, -1};
}

}  // namespace actorcc::topology
