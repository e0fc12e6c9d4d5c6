// The point-to-point transfers each call built on send/recv is made of, for the backends that
// carry such calls as one batch of sends and receives (the CPU backend over shm channels,
// NCCL with ncclSend/ncclRecv in a group). One definition of what all_to_all(_v), gather and
// scatter mean, whatever moves the bytes.
#pragma once
#include <vector>

#include "group/group_context.hpp"

namespace actorcc {

// This rank's transfers for `a` (Send, Recv, SendRecv, AllToAll, AllToAllV, Gather, Scatter),
// in an order every backend may issue at once. Transfers to this rank itself come as a send
// followed by its recv (in place on the root of gather/scatter: none).
std::vector<P2POp> p2p_transfers(const CollArgs& a, int rank, int world);

bool is_p2p_based(Collective c);

}  // namespace actorcc
