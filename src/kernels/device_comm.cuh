// DeviceComm: the small, trivially copyable view of a communicator that every kernel gets by
// value. It names each rank's shared workspace as mapped in this process, the per-CTA step
// counters, the host-mapped abort/error words and the workspace layout.
//
// Workspace layout (every rank's region has the same layout):
//   [flags]  uint64 flags[2 phases][kMaxBlocks][kMaxRanks]: flags[ph][b][src] is written by rank
//            src's CTA b (st.release.sys) with value step+1 once its data for that step and phase
//            is in place; only ever increases, so readers compare with >=.
//   [desc]   uint64 desc[kMaxBlocks][kMaxRanks]: the pipelined two-shot's call descriptor
//            (registration, offset, count, dtype, op) that rank src's CTA b stores before its
//            first flag of a call, so the receiving CTA can refuse a call whose ranks disagree
//            before anything is written into a peer's output.
//   [call]   uint64 call[kMaxRanks src][kCallWords]: rank src's current collective (call number,
//            descriptor hash, descriptor), stored by its CTA 0 at the call's start into every
//            rank's row src (kernels/call_check.hpp): what a waiting kernel compares when a
//            flag does not come.
//   [ll]     LL receive slots [2 parity][ll_blocks][world][ll_slot_bytes]: 16-byte lines of
//            {data.x, flag, data.y, flag}; the flag is the low 32 bits of step+1 xor the call's
//            descriptor hash (line_flag, kernels/call_check.hpp; the uint64 flags carry it too).
//   [ll128]  LL128 receive slots [2 parity][ll128_blocks][world-1 sources][ll128_slot_bytes]:
//            128-byte lines whose last 32-bit word is the flag (oneshot_ll128.cu). Only
//            LL128 lines ever enter this region (see the note there).
//   [data]   push slots [2 parity][data_blocks][2 phases][world][tile_bytes] (the pipelined
//            two-shot's direct mode uses each [parity][block] as [world][2 x tile_bytes]).
//   [p2p]    the point-to-point channels (algorithms/cuda/p2p_push.cu), per pair of ranks, apart
//            from everything above because their progress is per pair, not group-wide:
//            uint64 ready[kMaxRanks src][kP2PChannels]          written by src: messages in place
//            uint64 hdr[kMaxRanks src][kP2PChannels][kP2PSlots] written by src: each message's
//                                                               (bytes << 8 | dtype)
//            uint64 ack[kMaxRanks dst][kP2PChannels]            written by dst: messages of ours
//                                                               it has consumed (kP2PPoison: it
//                                                               refused one)
//            slots [world src][kP2PChannels][kP2PSlots][kP2PSlotBytes]
// Parity = step & 1. Every step of every algorithm exchanges at least one signal between CTA b
// of every pair of ranks, so when rank A's CTA b has finished step s+1 it has heard from rank
// B's CTA b at step s+1, which means B's CTA b finished step s: A may then overwrite the
// parity-(s & 1) slots in B at step s+2. CTA b only ever talks to CTA b of other ranks, and
// every rank launches the same grid for the same call, so per-CTA counters agree everywhere.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/mutation.hpp"
#include "kernels/call_check.hpp"

namespace actorcc::cuda {

constexpr int kMaxRanks = 8;
constexpr int kMaxBlocks = 1024;  // per-CTA counters and flag rows
// Point-to-point channels: CTAs per (pair, direction), messages in flight per channel, bytes per
// message. 16 x 2 x 64 KiB in flight per pair keeps NVLink busy across a flag round trip.
constexpr int kP2PChannels = 16;
constexpr int kP2PSlots = 2;
constexpr size_t kP2PSlotBytes = size_t(64) << 10;
constexpr unsigned long long kP2PPoison = 1ull << 63;

struct DeviceComm {
  char* ws[kMaxRanks];            // ws[r]: rank r's workspace mapped here (ws[rank] is ours)
  int rank = 0;
  int world = 1;
  unsigned long long* counters;   // [kMaxBlocks] per-CTA step counters, this GPU's memory
  volatile int* abort_word;       // host-mapped: nonzero = stop waiting
  int* error;                     // host-mapped [kErrorWords]: see KernelError
  unsigned long long timeout_ns;  // bound on any single wait
  size_t flags_off;
  size_t desc_off;
  size_t ll_off;
  size_t ll_slot_bytes;           // per (parity, block, src), LL lines
  int ll_blocks;
  size_t ll128_off;
  size_t ll128_slot_bytes;        // per (parity, block, source), multiple of 512
  int ll128_blocks;               // CTAs of the LL128 one-shot (3 per SM by default)
  size_t data_off;
  size_t tile_bytes;              // per (parity, block, phase, src)
  int data_blocks;
  size_t p2p_off;                 // the [p2p] region
  int p2p_channels;               // CTAs per point-to-point transfer (<= kP2PChannels)
  // [2 directions: 0 sent to, 1 received from][kMaxRanks peer][kP2PChannels]: messages this rank
  // has sent to / received from each peer per channel, this GPU's memory (never reset: both
  // ends of a pair count the same messages, so the counts agree across calls).
  unsigned long long* p2p_seq;
  // Abort polling (see Spin in primitives.cuh). abort_poll[0]: globaltimer time before which no
  // thread of this GPU reads the host abort word again; abort_poll[1]: nonzero once any kernel
  // of this communicator saw or raised an abort/timeout (sticky, device memory, cheap to poll).
  unsigned long long* abort_poll;
  // Nonzero once a kernel of this communicator has claimed the error record (record_error in
  // primitives.cuh); this GPU's memory, sticky like the record itself.
  unsigned long long* error_claim;
  unsigned long long abort_poll_ns;  // 0: every waiting thread reads the host word at every check
  int mutation = 0;                  // test-only build: common/mutation.hpp (always 0 otherwise)
  // This call's descriptor (group/call_desc.hpp) and its hash, set per call by the backend for
  // the collectives (kernels/call_check.hpp); call_hash 0: no check (point-to-point kernels,
  // which check their own headers, and ACTORCC_CUDA_CALL_CHECK=0).
  unsigned call_hash = 0;
  unsigned long long call_desc[2] = {0, 0};
  size_t call_off;                   // the [call] region
  unsigned long long* call_seq;      // collectives this rank has launched, this GPU's memory
};

// Error codes the kernels leave in error[0]. The record: [0] code, [1] peer, [2] collective,
// [3] unused, then for a mismatch found by the call check [4..7] the peer's descriptor and
// [8..11] this rank's (two 64-bit words each; all zero when the check did not find it).
enum KernelError : int { kErrNone = 0, kErrTimeout = 1, kErrAborted = 2, kErrMismatch = 3 };
constexpr int kErrorWords = 12;

// Where each peer's copy of this call's output starts, mapped here (registered buffers), passed
// by value to the kernels that write peers' outputs directly; nullptr entries: not registered.
struct PeerPtrs {
  char* p[kMaxRanks] = {};
  // A registered call maps every rank's output (p[rank] is the local one), an unregistered
  // call none: the one test of "registered" for the host planner and the kernels alike.
  __host__ __device__ bool registered() const { return p[0] != nullptr; }
};

inline size_t desc_bytes() { return size_t(kMaxBlocks) * kMaxRanks * sizeof(uint64_t); }

// Rounded to 4 KiB, so the regions after it keep their page alignment.
inline size_t call_bytes() { return 4096; }
static_assert(kMaxRanks * kCallWords * sizeof(uint64_t) <= 4096, "the [call] rows fit their page");

inline size_t flags_bytes() { return size_t(2) * kMaxBlocks * kMaxRanks * sizeof(uint64_t); }

// The [p2p] region's words (ready, hdr, ack) before its slots, rounded to 4 KiB.
constexpr size_t kP2PWordsBytes = (size_t(kMaxRanks) * kP2PChannels * (2 + kP2PSlots) * sizeof(uint64_t) + 4095) / 4096 * 4096;

// What the group agreed that sizes the regions above.
struct WorkspaceShape {
  int world = 1;
  int data_blocks = 1;
  size_t push_bytes = 0;     // [data]: tiles of push_bytes / (4 x data_blocks x world), 4 KiB multiples
  int ll_blocks = 128;
  size_t ll_slot_bytes = 16 << 10;
  int ll128_blocks = 0;      // 0: 3 per data CTA
  size_t ll128_bytes = 0;    // 0: 24 MiB for 2 ranks, 48 MiB for more
};

// The layout above: fills d's region offsets and sizes for `s` and returns the bytes of one
// rank's workspace. The only place that computes it.
inline size_t lay_out_workspace(DeviceComm& d, const WorkspaceShape& s) {
  const int W = s.world, NB = s.data_blocks;
  size_t tile = s.push_bytes / (size_t(4) * NB * W) / 4096 * 4096;
  if (tile < 4096) tile = 4096;
  d.world = W;
  d.flags_off = 0;
  d.desc_off = flags_bytes();
  d.call_off = d.desc_off + desc_bytes();
  d.ll_off = d.call_off + call_bytes();
  d.ll_blocks = s.ll_blocks;
  d.ll_slot_bytes = s.ll_slot_bytes;
  d.ll128_off = d.ll_off + size_t(2) * d.ll_blocks * W * d.ll_slot_bytes;
  d.ll128_blocks = s.ll128_blocks > 0 ? s.ll128_blocks : (3 * NB < kMaxBlocks ? 3 * NB : kMaxBlocks);
  // At least 2 groups of 512 bytes per slot: the LL128 two-shot uses one half for each phase.
  const size_t ll128_bytes = s.ll128_bytes ? s.ll128_bytes : size_t(24 << 20) * (W - 1 < 2 ? W - 1 : 2);
  const size_t slot = ll128_bytes / (size_t(2) * d.ll128_blocks * (W - 1)) / 512 * 512;
  d.ll128_slot_bytes = slot > 1024 ? slot : 1024;
  d.data_off = d.ll128_off + size_t(2) * d.ll128_blocks * (W - 1) * d.ll128_slot_bytes;
  d.data_blocks = NB;
  d.tile_bytes = tile;
  d.p2p_off = d.data_off + size_t(4) * NB * W * tile;
  d.p2p_channels = NB < kP2PChannels ? NB : kP2PChannels;
  return d.p2p_off + kP2PWordsBytes + size_t(W) * kP2PChannels * kP2PSlots * kP2PSlotBytes;
}


}  // namespace actorcc::cuda
