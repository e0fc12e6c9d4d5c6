// Checked mode (Options::checked): every rank compares the call's descriptor with every other
// rank's over the bootstrap, whatever the backend (the protocols' own always-on check:
// group/call_desc.hpp).
#pragma once
#include "group/group_context.hpp"

namespace actorcc {

// Collective over ctx's bootstrap. Point-to-point calls involve only their peers, so they are
// matched by the transfer itself (the receiver checks every message's count and dtype; the NCCL
// path swaps summaries in checked mode), never here. all_to_all_v's counts differ per rank by
// design: each rank appends its send and receive counts, and every rank checks every pair, so a
// disagreement fails on every rank, naming both, before any data moves. Throws InvalidArgument.
void check_matching(const GroupContext& ctx, const CollArgs& a);

}  // namespace actorcc
