// Argument checks a Communicator makes before any data moves. Each throws InvalidArgument
// naming the argument, the value and the rank.
#pragma once
#include "group/group_context.hpp"

namespace actorcc {

void validate_args(const CollArgs& a, int rank, int world);

}  // namespace actorcc
