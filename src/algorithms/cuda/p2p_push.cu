// Point-to-point transfers by pushes, for send, recv, their batches and all_to_all_v
// (send_push, recv_push, send_recv_push, all_to_all_v_push: forwarded_routes.cu). The other routes step
// every rank's CTA b together (group-wide counters); a transfer involves two ranks only, so it
// runs on per-pair channels instead (the [p2p] region of kernels/device_comm.cuh):
//  - CTA (lane, ch) moves the chunks ch, ch + G, ... (G = p2p_channels, kP2PSlotBytes each) of
//    each task of its lane, one message per chunk, and one empty message where it has no chunk,
//    so every channel carries at least one message of every transfer;
//  - the sender waits until slot (seq % kP2PSlots) in the receiver is free (ack >= seq + 1 -
//    kP2PSlots), stores the chunk, then its header and, after a system fence, ready = seq + 1;
//  - the receiver waits for ready >= seq + 1, compares the header with its own (bytes, dtype),
//    copies the chunk out and acknowledges (ack = seq + 1, after its loads: barrier + fence);
//  - a send ends once all its messages are acknowledged: the slots are free again and the data
//    is in the receiver's buffer when both calls return.
// Both ends count messages per (peer, direction, channel) in device memory (p2p_seq), never
// reset, so calls need no agreement beyond the matching transfers themselves: ranks not in a
// transfer take no part. A header that disagrees (different size or dtype) stops the receiver
// with kErrMismatch before anything reaches its buffer, and poisons the sender's ack so the
// sender stops with kErrMismatch too, naming each other. Every wait is bounded (Spin).
#include "algorithms/cuda/launch.hpp"
#include "kernels/primitives.cuh"

namespace actorcc::cuda {
namespace {

static_assert(kMaxP2PLanes == 2 * kMaxRanks + 1, "a lane per (direction, peer) and one of local copies");

__device__ __forceinline__ unsigned long long* p2p_word(const DeviceComm& c, int owner, size_t index) {
  return reinterpret_cast<unsigned long long*>(c.ws[owner] + c.p2p_off) + index;
}
// ready[src][ch], hdr[src][ch][slot], ack[dst][ch] in `owner`'s region.
__device__ __forceinline__ unsigned long long* p2p_ready(const DeviceComm& c, int owner, int src, int ch) {
  return p2p_word(c, owner, size_t(src) * kP2PChannels + ch);
}
__device__ __forceinline__ unsigned long long* p2p_hdr(const DeviceComm& c, int owner, int src, int ch, int slot) {
  return p2p_word(c, owner, size_t(kMaxRanks) * kP2PChannels + (size_t(src) * kP2PChannels + ch) * kP2PSlots + slot);
}
__device__ __forceinline__ unsigned long long* p2p_ack(const DeviceComm& c, int owner, int dst, int ch) {
  return p2p_word(c, owner, size_t(kMaxRanks) * kP2PChannels * (1 + kP2PSlots) + size_t(dst) * kP2PChannels + ch);
}
__device__ __forceinline__ char* p2p_slot(const DeviceComm& c, int owner, int src, int ch, int slot) {
  return c.ws[owner] + c.p2p_off + kP2PWordsBytes +
         ((size_t(src) * kP2PChannels + ch) * kP2PSlots + slot) * kP2PSlotBytes;
}

// Thread 0: waits until `w` >= v; false (error recorded, naming `peer`) on timeout, abort or a
// poisoned word (the peer refused a message: mismatch).
__device__ bool await_word(const DeviceComm& c, Spin& spin, const unsigned long long* w, unsigned long long v,
                           int peer, int coll) {
  for (;;) {
    const unsigned long long x = ld_acquire_sys(w);
    if (x & kP2PPoison) {
      record_error(c, kErrMismatch, peer, coll);
      return false;
    }
    if (x >= v) return true;
    if (spin.expired(c, peer, coll)) return false;
  }
}

__global__ void __launch_bounds__(512) p2p_kernel(DeviceComm c, P2PBatch batch, int coll) {
  pdl_wait();
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int G = c.p2p_channels, me = c.rank;
  const int lane = blockIdx.x / G, ch = blockIdx.x % G;
  const P2PTask* first = batch.task + batch.lane_begin[lane];
  const P2PTask* last = batch.task + batch.lane_begin[lane + 1];
  const int kind = first->kind, peer = first->peer;
  if (kind == static_cast<int>(P2PKind::Copy)) {  // local: striped over the lane's CTAs, no messages
    for (const P2PTask* t = first; t != last; ++t) {
      const bool vec = aligned16(t->src) && aligned16(t->dst);
      for (size_t lo = size_t(ch) * kP2PSlotBytes; lo < t->nbytes; lo += size_t(G) * kP2PSlotBytes)
        copy_bytes(t->dst + lo, t->src + lo, min(kP2PSlotBytes, size_t(t->nbytes - lo)), vec, false);
    }
    return;
  }
  const bool sending = kind == static_cast<int>(P2PKind::Send);
  unsigned long long* seq_word = c.p2p_seq + (size_t(sending ? 0 : 1) * kMaxRanks + peer) * kP2PChannels + ch;
  unsigned long long seq = __ldcg(seq_word);
  Spin spin;
  bool ok = true;
  for (const P2PTask* t = first; ok && t != last; ++t) {
    const size_t nbytes = t->nbytes;
    const size_t nchunks = nbytes == 0 ? 1 : (nbytes + kP2PSlotBytes - 1) / kP2PSlotBytes;
    const size_t mine = size_t(ch) < nchunks ? (nchunks - ch + G - 1) / G : 1;
    const bool vec = aligned16(sending ? t->src : t->dst);
    for (size_t i = 0; i < mine; ++i, ++seq) {
      const size_t chunk = ch + i * G;
      const size_t lo = chunk * kP2PSlotBytes;
      const size_t n = chunk < nchunks && lo < nbytes ? min(kP2PSlotBytes, nbytes - lo) : 0;
      const int slot = static_cast<int>(seq % kP2PSlots);
      if (sending) {
        bool free = true;
        if (threadIdx.x == 0 && seq + 1 >= kP2PSlots)
          free = await_word(c, spin, p2p_ack(c, me, peer, ch), seq + 1 - kP2PSlots, peer, coll);
        if (!(ok = cta_verdict(free))) break;
        copy_bytes(p2p_slot(c, peer, me, ch, slot), t->src + lo, n, vec, false);
        __syncthreads();  // every thread's stores precede thread 0's fence
        if (threadIdx.x == 0) {
          *reinterpret_cast<volatile unsigned long long*>(p2p_hdr(c, peer, me, ch, slot)) = t->header;
          __threadfence_system();
          st_release_sys(p2p_ready(c, peer, me, ch), seq + 1);
        }
      } else {
        bool good = true;
        if (threadIdx.x == 0) {
          good = await_word(c, spin, p2p_ready(c, me, peer, ch), seq + 1, peer, coll);
          if (good && *reinterpret_cast<volatile unsigned long long*>(p2p_hdr(c, me, peer, ch, slot)) != t->header) {
            // The sender's transfer differs in size or dtype: write nothing, tell both ends.
            record_error(c, kErrMismatch, peer, coll);
            st_release_sys(p2p_ack(c, peer, me, ch), kP2PPoison | seq);
            good = false;
          }
        }
        if (!(ok = cta_verdict(good))) break;
        copy_bytes(t->dst + lo, p2p_slot(c, me, peer, ch, slot), n, vec, true);
        __syncthreads();  // every thread's loads of the slot are done before it is handed back
        if (threadIdx.x == 0) {
          __threadfence_system();
          st_release_sys(p2p_ack(c, peer, me, ch), seq + 1);
        }
      }
    }
  }
  // A send returns once the receiver has consumed every message (its data is in place and the
  // slots are free for whatever the pair does next).
  if (ok && sending && threadIdx.x == 0) await_word(c, spin, p2p_ack(c, me, peer, ch), seq, peer, coll);
  __syncthreads();
  if (threadIdx.x == 0) *seq_word = seq;
}

}  // namespace

cudaError_t launch_p2p(const DeviceComm& c, const Tuning& t, const CallArgs& a) {
  const P2PBatch& b = *a.batch;
  if (b.nlanes == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(b.nlanes * c.p2p_channels);
  return launch_kernel(p2p_kernel, grid, t.threads, t, a.stream, c, b, a.coll);
}

}  // namespace actorcc::cuda
