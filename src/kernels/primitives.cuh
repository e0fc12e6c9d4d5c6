// Device primitives shared by every algorithm: cross-GPU memory ordering, bounded spinning,
// slot addressing, 16-byte vector copies with scalar tails.
//
// Memory ordering (PTX memory model, system scope because the peer is another GPU):
//  - a writer CTA stores its data with plain st.global (to peer memory over NVLink), then
//    __syncthreads() so all of the CTA's stores precede thread 0 in CTA order, then thread 0
//    issues fence.sc.sys (__threadfence_system, cumulative over what the CTA observed) and a
//    st.release.sys of the flag;
//  - a reader's thread 0 spins with ld.acquire.sys on the flag in its own memory, then
//    __syncthreads(); the CTA then reads the data with ld.global.cg (L2, never a stale L1 line).
// LL lines carry data and flag in one 16-byte st.volatile.v4 ({data, flag, data, flag}, each
// 8-byte half with its own flag copy), so the reader needs no separate flag: it polls the line
// itself. Like NCCL's LL protocol this relies on the hardware delivering each aligned 8-byte
// half of a vector store whole (the PTX model only promises it per 32-bit element).
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/device_comm.cuh"

namespace actorcc::cuda {

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void st_release_sys(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_acquire_sys(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_volatile_v4(void* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint4 ld_volatile_v4(const void* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// Records the first failure in host-mapped memory and raises the abort word (and its device
// copy), so every other wait of this and later kernels gives up quickly too. `descs`: for a
// call-check mismatch, the peer's and this rank's descriptors (4 words), else nullptr.
// The record is claimed with a CAS on a device word: a plain check of the host-mapped code
// would let a CTA that saw this abort's device copy (raised below, after the record) still read
// the code as empty and write its "aborted" over the first recorder's timeout or mismatch, so
// the error would no longer name the culprit. Only the winner writes the record, code last.
static __device__ __noinline__ void record_error(const DeviceComm& c, int code, int peer, int coll,
                                                 const unsigned long long* descs = nullptr) {
  if (atomicCAS(c.error_claim, 0ull, 1ull) == 0ull) {
    volatile int* e = c.error;
    e[1] = peer;
    e[2] = coll;
    if (descs != nullptr)
      for (int i = 0; i < 4; ++i) {
        e[4 + 2 * i] = static_cast<int>(descs[i] & 0xffffffffu);
        e[5 + 2 * i] = static_cast<int>(descs[i] >> 32);
      }
    __threadfence_system();
    e[0] = code;
  }
  *c.abort_word = 1;
  reinterpret_cast<volatile unsigned long long*>(c.abort_poll)[1] = 1;
  __threadfence_system();
}

// Has the group been aborted? The abort word lives in host memory: a read is a PCIe round trip,
// and on 2 x H200 (VM) such reads are served one after another, ~1 us each. It must not be read
// by every waiting thread: the LL one-shot at 1 MiB has 2048 warps spinning, and when a wait
// passes 1024 polls (~165 us; the peer late once: a host hiccup, a graph upload) all of them read
// it at once, ~2 ms for the last one (measured: 128x512 threads reading it once take 1.9 ms).
// The waiting rank then ends its call ~2 ms late, so the peer waits past 1024 polls on the next
// call and storms in turn: a self-sustaining ~1.2 ms per call (tests/gpu/stall.sh reproduces
// it). So at most one thread per GPU reads the host word per abort_poll_ns (a CAS on a device
// timestamp elects it), and a raised abort is copied to device memory, which every waiting
// thread polls cheaply. abort_poll_ns == 0 restores the old per-thread read (measurements only).
__device__ __forceinline__ bool abort_raised(const DeviceComm& c, unsigned long long now) {
  if (c.abort_poll_ns == 0) return *c.abort_word != 0;
  volatile unsigned long long* ap = c.abort_poll;
  if (ap[1] != 0) return true;
  const unsigned long long next = ap[0];
  if (now < next) return false;
  // One lane per warp competes (fewer same-address atomics); the CAS winner reads the host word.
  unsigned lt;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
  if ((__activemask() & lt) != 0) return false;
  if (atomicCAS(c.abort_poll, next, now + c.abort_poll_ns) != next) return false;
  if (*c.abort_word == 0) return false;
  ap[1] = 1;
  return true;
}

// The call check's arbitration (kernels/call_check.hpp), on the slow path of a wait for `peer`:
// true, with the mismatch recorded, when the peer's published call has this rank's call number
// and another descriptor (a flag folded with another hash never comes, so the wait would last
// to the timeout). Both descriptors go into the error record for the host's message.
static __device__ __noinline__ bool peer_runs_another_call(const DeviceComm& c, int peer, int coll) {
  if (c.call_hash == 0) return false;
  const volatile unsigned long long* row = reinterpret_cast<const unsigned long long*>(c.ws[c.rank] + c.call_off);
  const unsigned long long mine = row[c.rank * kCallWords], theirs = row[peer * kCallWords];
  if (!calls_disagree(mine, theirs)) return false;
  // Our own row too: the call number compared is the one our CTA 0 published.
  const unsigned long long w[4] = {row[peer * kCallWords + 1], row[peer * kCallWords + 2], row[c.rank * kCallWords + 1],
                                   row[c.rank * kCallWords + 2]};
  // Until each descriptor hashes to its word's hash, its stores are still on their way.
  if (!desc_matches(theirs, w[0], w[1]) || !desc_matches(mine, w[2], w[3])) return false;
  record_error(c, kErrMismatch, peer, coll, w);
  return true;
}

// Spin budget check, called on every poll but acting every 1024th (the deadline starts at the
// first check, after ~1000 polls, which keeps the timer read off the fast path).
struct Spin {
  unsigned long long deadline = 0;
  unsigned n = 0;
  __device__ __forceinline__ bool expired(const DeviceComm& c, int peer, int coll) {
    if ((++n & 1023u) != 0) return false;
    const unsigned long long now = globaltimer();
    if (abort_raised(c, now)) {
      record_error(c, kErrAborted, peer, coll);
      return true;
    }
    if (peer_runs_another_call(c, peer, coll)) return true;
    if (deadline == 0) deadline = now + c.timeout_ns;
    if (now > deadline) {
      record_error(c, kErrTimeout, peer, coll);
      return true;
    }
    return false;
  }
};

// The rank k places after this one (0 < k < world). Every rank visits its peers in this order,
// so at each step of a push loop the ranks write to different peers (no peer is written by all
// at once).
__device__ __forceinline__ int peer_after(const DeviceComm& c, int k) {
  const int q = c.rank + k;
  return q < c.world ? q : q - c.world;
}

__device__ __forceinline__ unsigned long long* flag_ptr(const DeviceComm& c, int owner, int ph, int b, int src) {
  return reinterpret_cast<unsigned long long*>(c.ws[owner] + c.flags_off) + (size_t(ph) * kMaxBlocks + b) * kMaxRanks + src;
}
__device__ __forceinline__ char* data_slot(const DeviceComm& c, int owner, int parity, int b, int ph, int src) {
  return c.ws[owner] + c.data_off + ((((size_t)parity * c.data_blocks + b) * 2 + ph) * c.world + src) * c.tile_bytes;
}
__device__ __forceinline__ char* ll_slot(const DeviceComm& c, int owner, int parity, int b, int src) {
  return c.ws[owner] + c.ll_off + (((size_t)parity * c.ll_blocks + b) * c.world + src) * c.ll_slot_bytes;
}
// LL128 slots hold no entry for the owner itself: source src is entry src (src < owner) or
// src - 1 (src > owner) of the owner's region.
__device__ __forceinline__ char* ll128_slot(const DeviceComm& c, int owner, int parity, int b, int src) {
  const int idx = src < owner ? src : src - 1;
  return c.ws[owner] + c.ll128_off +
         (((size_t)parity * c.ll128_blocks + b) * (c.world - 1) + idx) * c.ll128_slot_bytes;
}

// CTA-wide step bookkeeping. Kernels may be launched with programmatic dependent launch
// (PDL): griddepcontrol.wait blocks until the previous grid on the stream has completed and its
// memory is visible, so everything after it sees the previous call's results exactly as with
// plain stream order; launch_dependents then lets the next call's CTAs be scheduled while this
// one runs (they park in their own wait), hiding the launch latency. Every thread reads the
// CTA's counter itself (no barrier on the critical path); thread 0 writes it back at the end,
// after a barrier every kernel passes once all threads have read it.
struct Step {
  unsigned long long s;  // current step number (flag value s+1)
  Spin spin;
};
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
// After pdl_wait(): a kernel may issue its first input loads in between, so that their latency
// and the counter read's overlap (oneshot_ll128.cu).
// A collective's CTA 0 also numbers the call and publishes it into every rank's [call] row
// (kernels/call_check.hpp): plain stores, no fence (only the slow path of a wait reads them); the
// previous kernel has completed (griddepcontrol.wait), so the count it left is visible.
__device__ __forceinline__ Step read_steps(const DeviceComm& c) {
  Step st;
  st.s = __ldcg(c.counters + blockIdx.x);
  if (c.call_hash != 0 && blockIdx.x == 0 && threadIdx.x == 0) {
    const unsigned long long seq = __ldcg(c.call_seq) + 1;
    *c.call_seq = seq;
    const unsigned long long w = call_word(static_cast<uint32_t>(seq), c.call_hash);
    for (int q = 0; q < c.world; ++q) {
      volatile unsigned long long* row = reinterpret_cast<unsigned long long*>(c.ws[q] + c.call_off) + c.rank * kCallWords;
      row[1] = c.call_desc[0];
      row[2] = c.call_desc[1];
      row[0] = w;
    }
  }
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  return st;
}
__device__ __forceinline__ Step begin_steps(const DeviceComm& c) {
  pdl_wait();
  return read_steps(c);
}
__device__ __forceinline__ void end_steps(const DeviceComm& c, const Step& st) {
  __syncthreads();
  if (threadIdx.x == 0) c.counters[blockIdx.x] = st.s;
}

// Thread 0's verdict (`ok`; other threads' values are ignored) for the whole CTA. Every thread
// calls it; the second barrier lets the next call rewrite the shared word.
__device__ __forceinline__ bool cta_verdict(bool ok) {
  __shared__ int s_ok;
  if (threadIdx.x == 0) s_ok = ok ? 1 : 0;
  __syncthreads();
  const bool all = s_ok != 0;
  __syncthreads();
  return all;
}

// Thread 0 only: after a system fence over the CTA's earlier stores (the caller's barrier puts
// every thread's stores before it), raises this CTA's flag `ph` = v in every peer in `to_mask`.
__device__ __forceinline__ void raise_flags(const DeviceComm& c, int ph, unsigned long long v, unsigned to_mask = 0xffu) {
  __threadfence_system();
  for (int k = 1; k < c.world; ++k) {
    const int q = peer_after(c, k);
    if (to_mask >> q & 1u) st_release_sys(flag_ptr(c, q, ph, blockIdx.x, c.rank), flag_word(v, c.call_hash));
  }
}
// Thread 0 only: waits until the flag `ph` of every peer in `from_mask` has reached v with this
// call's hash (flag_reached, kernels/call_check.hpp). False on timeout/abort/mismatch (recorded
// by Spin, naming the peer).
__device__ __forceinline__ bool await_flags(const DeviceComm& c, Step& st, int ph, unsigned long long v, int coll,
                                            unsigned from_mask = 0xffu) {
  for (int k = 1; k < c.world; ++k) {
    const int q = (c.rank + c.world - k) % c.world;
    if (!(from_mask >> q & 1u)) continue;
    const unsigned long long* f = flag_ptr(c, c.rank, ph, blockIdx.x, q);
    while (!flag_reached(ld_acquire_sys(f), v, c.call_hash))
      if (st.spin.expired(c, q, coll)) return false;
  }
  return true;
}

// Publishes this CTA's phase-`ph` data of step st.s to every peer (or only those in `to_mask`),
// then waits for every peer's (or those in `from_mask`). Returns false on timeout/abort (for
// the whole CTA). Must be called by all threads.
__device__ __forceinline__ bool exchange(const DeviceComm& c, Step& st, int ph, int coll, unsigned to_mask = 0xffu,
                                         unsigned from_mask = 0xffu) {
  __syncthreads();  // every thread's data stores precede thread 0's fence
  bool ok = true;
  if (threadIdx.x == 0) {
    raise_flags(c, ph, st.s + 1, to_mask);
    ok = await_flags(c, st, ph, st.s + 1, coll, from_mask);
  }
  return cta_verdict(ok);
}

// ---- 16-byte vector copies with a scalar tail -----------------------------------------------
__device__ __forceinline__ uint4 ld_cg(const void* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }

// Copies `n` bytes with the CTA's threads; `vec` says both pointers are 16-byte aligned (else
// byte copies: only reached for buffers the caller passed misaligned, or odd slices). Four
// 16-byte loads in flight per thread.
__device__ __forceinline__ void copy_bytes(char* __restrict__ dst, const char* __restrict__ src, size_t n, bool vec,
                                           bool src_cg) {
  const size_t nv = vec ? n / 16 : 0;
  const uint4* s4 = reinterpret_cast<const uint4*>(src);
  uint4* d4 = reinterpret_cast<uint4*>(dst);
  constexpr int U = 4;
  const size_t stride = blockDim.x;
  size_t i = threadIdx.x;
  for (; i + (U - 1) * stride < nv; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = src_cg ? __ldcg(s4 + i + u * stride) : s4[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u) d4[i + u * stride] = v[u];
  }
  for (; i < nv; i += stride) d4[i] = src_cg ? __ldcg(s4 + i) : s4[i];
  for (size_t j = nv * 16 + threadIdx.x; j < n; j += stride) dst[j] = src_cg ? __ldcg(src + j) : src[j];
}

// One element through L2 (ld.global.cg), for any 1/2/4/8-byte element type.
template <typename T>
__device__ __forceinline__ T ld_cg_elem(const T* p) {
  using U = std::conditional_t<sizeof(T) == 1, unsigned char,
            std::conditional_t<sizeof(T) == 2, unsigned short,
            std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>>>;
  U v = __ldcg(reinterpret_cast<const U*>(p));
  T r;
  memcpy(&r, &v, sizeof(T));
  return r;
}

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace actorcc::cuda
