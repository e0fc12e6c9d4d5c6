// A short name for a group, derived from its whole unique id: what its shm segments and sockets
// are named after (GroupContext::group_tag).
#pragma once
#include <string>

#include "actorcc/unique_id.hpp"

namespace actorcc {

// 16 lowercase hex digits of the FNV-1a hash of every byte of `id`, so names of different groups
// never collide and nobody outside the group can guess them from the address alone.
std::string group_tag_of(const UniqueId& id);

}  // namespace actorcc
