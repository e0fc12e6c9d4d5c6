// What the CUDA point-to-point kernel (p2p_push.cu) is given for one call: the call's transfers
// (algorithms/p2p_plan.hpp) as tasks grouped into lanes, one lane per (direction, peer), each
// lane's tasks in the order the caller issued them. A lane runs on its own CTAs, so every
// transfer of a batch progresses at once (a rank that sends to and receives from the same peer
// cannot deadlock); inside a lane the tasks run one after the other, which matches the k-th send
// from A to B with the k-th receive of B from A, as NCCL's groups do. Plain host code: built and
// unit-tested without nvcc; passed to the kernel by value (kernel parameters, so capturable).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "actorcc/communicator.hpp"  // P2POp

namespace actorcc::cuda {

// Transfers per call: kernel parameters hold up to 32 KiB (CUDA 12.1+), the batch below ~19 KiB.
constexpr int kMaxP2PTasks = 480;
// Sends and receives per peer (8 ranks at most) and the local copies.
constexpr int kMaxP2PLanes = 2 * 8 + 1;

enum class P2PKind : int { Send = 0, Recv = 1, Copy = 2 };

struct P2PTask {
  const char* src = nullptr;  // Send, Copy
  char* dst = nullptr;        // Recv, Copy
  unsigned long long nbytes = 0;
  unsigned long long header = 0;  // (nbytes << 8 | dtype): what the two ends must agree on
  int peer = -1;
  int kind = 0;               // P2PKind
};

struct P2PBatch {
  int nlanes = 0;
  int lane_begin[kMaxP2PLanes + 1] = {};  // lane l: tasks [lane_begin[l], lane_begin[l + 1])
  P2PTask task[kMaxP2PTasks];
};

// The header both ends of a transfer compare (p2p_push.cu).
inline unsigned long long p2p_header(size_t nbytes, DataType dtype) {
  return (static_cast<unsigned long long>(nbytes) << 8) | static_cast<unsigned long long>(dtype);
}

// Groups `ops` (this rank's transfers) into lanes; a send to this rank itself and the receive
// from itself in the same position become one local copy. Throws InvalidArgument (naming
// `rank`) for more than kMaxP2PTasks transfers or a local send and receive that disagree.
P2PBatch build_p2p_batch(const std::vector<P2POp>& ops, int rank);

}  // namespace actorcc::cuda
