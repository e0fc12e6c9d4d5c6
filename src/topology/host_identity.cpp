#include <unistd.h>

#include <fstream>
#include <string>

#include "common/env.hpp"
#include "topology/topology.hpp"

namespace actorcc::topology {

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

std::string host_id() {
  // setting: ACTORCC_NODE_ID - treat this process as being on the named node (virtual nodes)
  if (auto v = env::get("ACTORCC_NODE_ID")) return "node:" + *v;
  // The boot id separates two machines (containers) that share a hostname.
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  if (f) std::getline(f, boot);
  return hostname() + "/" + boot;
}

}  // namespace actorcc::topology
