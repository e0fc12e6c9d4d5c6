#include "core/group_tag.hpp"

#include <cstdint>
#include <cstdio>

namespace actorcc {

std::string group_tag_of(const UniqueId& id) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : id.bytes) h = (h ^ b) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace actorcc
