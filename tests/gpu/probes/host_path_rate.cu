// Can pinned host memory carry a share of a 2-GPU all-reduce beside NVLink? The question behind
// docs/perf/tuning.md T39: LL128 over NVLink is link-bound (16 MiB: 50.8 us for the push alone, T28),
// and every other route tried (raw stores with fences, copy engines, bulk copies; T17-T19, 26,
// 27, 38) costs more than it returns. Each GPU also has its own PCIe link to the host, idle during
// an all-reduce. If a few SMs can stream a share through host memory (GPU i writes it into its
// host buffer, the peer reads it back) at tens of GB/s each way while the other SMs keep NVLink
// at its rate, the NVLink share shrinks by that much.
//
// One process, two visible GPUs; both GPUs run each case at once, 100 back-to-back launches each.
// Every kernel runs one CTA per SM (132 x 1024 threads, 120 KiB of shared memory to keep a second
// CTA off the SM): CTAs [0, P) carry the host share, the rest push the NVLink share into the peer.
// Host modes: write (GPU -> its host buffer), read (the peer's host buffer -> local), both (half
// the P CTAs each), flagged (both, in chunks: the writer fences and raises a per-chunk flag in
// host memory, the reader polls it before reading the chunk), ll (both, 8 data bytes and two
// 32-bit flags per 16-byte line, no fence). Also: copy engines to and from host memory, and the
// round trip of a flag through host memory against one through the peer's memory.
// build: part of the GPU tier (target host_path_rate), or from the repository root
//   nvcc -std=c++20 -O3 -arch=sm_90 -Isrc tests/gpu/probes/host_path_rate.cu
// (it uses the library's LL line store and load, kernels/primitives.cuh)
// run: host_path_rate (one process that sees both GPUs)
#include <cstring>

#include "kernels/primitives.cuh"
#include "two_gpus.cuh"

using actorcc::cuda::ld_volatile_v4;
using actorcc::cuda::st_volatile_v4;

enum Mode { kIdle, kWrite, kRead, kBoth, kFlagged, kLL };
constexpr unsigned kMaxChunks = 1024;   // flags per writer CTA
constexpr long long kSpinBound = 1 << 20;  // polls before a case gives up (never hang)

struct Args {
  uint4* nv_dst;  // the peer's memory
  const uint4* nv_src;
  size_t nv_n;     // uint4s pushed over NVLink
  uint4* h_out;    // my host buffer (the peer reads it)
  const uint4* h_in;  // the peer's host buffer
  const uint4* src;   // local input of the host share
  uint4* dst;         // local output of the host share
  size_t h_n;         // uint4s of payload in the host share
  unsigned* flags_out;       // host memory, raised by my writers
  const unsigned* flags_in;  // host memory, raised by the peer's writers
  unsigned P, chunk_n, epoch;
  int mode;
  unsigned* err;  // device memory: set when a poll gave up
};

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint4 add(uint4 a, uint4 b) { return {a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w}; }

// The share [lo, hi) of n items for part k of parts.
__device__ __forceinline__ void slice(size_t n, unsigned parts, unsigned k, size_t& lo, size_t& hi) {
  const size_t per = (n + parts - 1) / parts;
  lo = min(n, size_t(k) * per);
  hi = min(n, lo + per);
}

__device__ void host_write(const Args& a, unsigned w, unsigned writers) {
  size_t lo, hi;
  slice(a.h_n, writers, w, lo, hi);
  if (a.mode == kLL) {  // one 16-byte line per 8 payload bytes: {x, epoch, y, epoch}
    const uint2* s = reinterpret_cast<const uint2*>(a.src);
    for (size_t i = 2 * lo + threadIdx.x; i < 2 * hi; i += blockDim.x) {
      const uint2 d = s[i];
      st_volatile_v4(a.h_out + i, {d.x, a.epoch, d.y, a.epoch});
    }
    return;
  }
  const size_t step = a.mode == kFlagged ? a.chunk_n : hi - lo;
  for (size_t c = lo, j = 0; c < hi; c += step, ++j) {
    const size_t e = min(hi, c + step);
    for (size_t i = c + threadIdx.x; i < e; i += blockDim.x) a.h_out[i] = a.src[i];
    if (a.mode != kFlagged) continue;
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) atomicExch_system(a.flags_out + w * kMaxChunks + j, a.epoch);
  }
}

__device__ void host_read(const Args& a, unsigned r, unsigned readers) {
  size_t lo, hi;
  slice(a.h_n, readers, r, lo, hi);
  if (a.mode == kLL) {
    uint2* d = reinterpret_cast<uint2*>(a.dst);
    const uint2* s = reinterpret_cast<const uint2*>(a.src);
    for (size_t i = 2 * lo + threadIdx.x; i < 2 * hi; i += blockDim.x) {
      uint4 v = ld_volatile_v4(a.h_in + i);
      for (long long n = 0; (v.y != a.epoch || v.w != a.epoch) && n < kSpinBound; ++n) v = ld_volatile_v4(a.h_in + i);
      if (v.y != a.epoch || v.w != a.epoch) {
        atomicExch(a.err, 1u);
        return;
      }
      d[i] = {v.x + s[i].x, v.z + s[i].y};
    }
    return;
  }
  const size_t step = a.mode == kFlagged ? a.chunk_n : hi - lo;
  for (size_t c = lo, j = 0; c < hi; c += step, ++j) {
    if (a.mode == kFlagged) {
      bool gave_up = false;
      if (threadIdx.x == 0) {
        const unsigned* f = a.flags_in + r * kMaxChunks + j;
        long long n = 0;
        while (ld_acquire(f) < a.epoch && ++n < kSpinBound) {
        }
        gave_up = n >= kSpinBound;
        if (gave_up) atomicExch(a.err, 1u);
      }
      if (__syncthreads_or(gave_up)) return;
    }
    const size_t e = min(hi, c + step);
    for (size_t i = c + threadIdx.x; i < e; i += blockDim.x) a.dst[i] = add(ld_volatile_v4(a.h_in + i), a.src[i]);
  }
}

__global__ void mixed(Args a) {
  if (blockIdx.x >= a.P) {  // NVLink share
    const unsigned k = blockIdx.x - a.P, n = gridDim.x - a.P;
    for (size_t i = k * size_t(blockDim.x) + threadIdx.x; i < a.nv_n; i += size_t(n) * blockDim.x)
      a.nv_dst[i] = a.nv_src[i];
    return;
  }
  switch (a.mode) {
    case kWrite: host_write(a, blockIdx.x, a.P); break;
    case kRead: host_read(a, blockIdx.x, a.P); break;
    case kBoth:
    case kFlagged:
    case kLL:
      if (blockIdx.x < a.P / 2) host_write(a, blockIdx.x, a.P / 2);
      else host_read(a, blockIdx.x - a.P / 2, a.P / 2);
      break;
    default: break;
  }
}

// One thread bounces a counter with the peer: through host memory or the peer's memory.
__global__ void ping(unsigned* mine, unsigned* theirs, int iters, bool first, unsigned base, unsigned* err) {
  for (int i = 1; i <= iters; ++i) {
    const unsigned v = base + i;
    if (first) atomicExch_system(theirs, v);
    long long n = 0;
    while (ld_acquire(mine) < v && ++n < kSpinBound) {
    }
    if (n >= kSpinBound) {
      *err = 1;
      return;
    }
    if (!first) atomicExch_system(theirs, v);
  }
}

struct Side {
  char *src, *nv_dst, *dst, *host;  // host: pinned, written by this GPU
  unsigned *flags, *err, *peer_flag_dev;
  cudaStream_t s;
  cudaEvent_t a, b;
};

int main() {
  const size_t big = size_t(64) << 20, hbig = size_t(32) << 20;
  const int grid = 132, block = 1024, smem = 120 << 10;
  Side d[2];
  open_both(d, [&](int i) {
    cudaDeviceProp p{};
    RK(cudaGetDeviceProperties(&p, i));
    printf("GPU %d: %s, PCI %04x:%02x:%02x, %d SMs\n", i, p.name, p.pciDomainID, p.pciBusID, p.pciDeviceID,
           p.multiProcessorCount);
    RK(cudaMalloc(&d[i].src, big));
    RK(cudaMalloc(&d[i].nv_dst, big));
    RK(cudaMalloc(&d[i].dst, big));
    RK(cudaMalloc(&d[i].err, 4));
    RK(cudaMalloc(&d[i].peer_flag_dev, 4));
    RK(cudaMemset(d[i].src, 1, big));
    RK(cudaMemset(d[i].err, 0, 4));
    RK(cudaMemset(d[i].peer_flag_dev, 0, 4));
    RK(cudaHostAlloc(reinterpret_cast<void**>(&d[i].host), 2 * hbig, cudaHostAllocPortable | cudaHostAllocMapped));
    RK(cudaHostAlloc(reinterpret_cast<void**>(&d[i].flags), 64 * kMaxChunks * 4 + 64,
                     cudaHostAllocPortable | cudaHostAllocMapped));
    memset(d[i].flags, 0, 64 * kMaxChunks * 4 + 64);
    RK(cudaFuncSetAttribute(mixed, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  });
  unsigned epoch = 0;
  auto timed = [&](const char* name, auto&& launch, int iters, double nv_bytes, double h_bytes) {
    // Epochs (the flags' values) only ever grow, across rounds, repetitions and cases.
    double t[2];
    time_both(d, iters, [&](int i, int rep, int it) { launch(i, epoch + unsigned(rep * iters + it) + 1); }, t);
    epoch += 2 * iters;
    unsigned err[2];
    for (int i = 0; i < 2; ++i) {
      RK(cudaSetDevice(i));
      RK(cudaMemcpy(&err[i], d[i].err, 4, cudaMemcpyDeviceToHost));
      RK(cudaMemset(d[i].err, 0, 4));
    }
    const double us0 = t[0], us1 = t[1], us = us0 > us1 ? us0 : us1;
    printf("%-44s %8.2f / %8.2f us  nvlink %6.1f  host %5.1f GB/s each way%s\n", name, us0, us1, nv_bytes / us / 1e3,
           h_bytes / us / 1e3, err[0] | err[1] ? "  POLL GAVE UP" : "");
  };
  auto kernel = [&](int mode, size_t nv_bytes, size_t h_bytes, unsigned P, unsigned chunk, int iters) {
    char name[96];
    const char* mn[] = {"idle", "write", "read", "both", "flagged", "ll"};
    snprintf(name, sizeof name, "nv %5zu KiB + %-7s %5zu KiB P %2u c %3u K", nv_bytes >> 10, mn[mode], h_bytes >> 10,
             P, chunk >> 10);
    timed(
        name,
        [&](int i, unsigned ep) {
          Args a{};
          a.nv_dst = reinterpret_cast<uint4*>(d[1 - i].nv_dst);
          a.nv_src = reinterpret_cast<const uint4*>(d[i].src);
          a.nv_n = nv_bytes / 16;
          // LL lines alternate between two halves by the epoch's parity: without it a rank one
          // launch ahead overwrote lines the peer had not read yet, and that poll gave up.
          const size_t half = mode == kLL ? (ep & 1) * 2 * (h_bytes / 16) : 0;
          a.h_out = reinterpret_cast<uint4*>(d[i].host) + half;
          a.h_in = reinterpret_cast<const uint4*>(d[1 - i].host) + half;
          a.src = reinterpret_cast<const uint4*>(d[i].src + big / 2);
          a.dst = reinterpret_cast<uint4*>(d[i].dst);
          a.h_n = h_bytes / 16;
          a.flags_out = d[i].flags;
          a.flags_in = d[1 - i].flags;
          a.P = P;
          a.chunk_n = chunk / 16;
          a.epoch = ep;
          a.mode = mode;
          a.err = d[i].err;
          mixed<<<grid, block, smem, d[i].s>>>(a);
        },
        iters, nv_bytes, h_bytes);
  };
  const size_t K = 1 << 10, M = 1 << 20;
  puts("== NVLink alone (132 CTAs, or 132 - P with P idle)");
  for (size_t mb : {16, 15, 14, 13, 12, 64, 60, 56})
    for (unsigned P : {0u, 8u, 16u}) kernel(kIdle, mb * M, 0, P, 0, 100);
  puts("== host memory alone (both GPUs at once)");
  for (int mode : {kWrite, kRead, kBoth})
    for (unsigned P : {4u, 8u, 16u, 32u})
      for (size_t mb : {1, 4}) kernel(mode, 0, mb * M, P, 0, 100);
  for (unsigned chunk : {16u, 64u, 256u})
    for (unsigned P : {8u, 16u, 32u}) kernel(kFlagged, 0, 2 * M, P, chunk * K, 100);
  for (unsigned P : {8u, 16u, 32u})
    for (size_t mb : {1, 2}) kernel(kLL, 0, mb * M, P, 0, 100);
  puts("== NVLink and host memory in one kernel");
  for (size_t hk : {1024, 2048, 3072})
    for (unsigned P : {8u, 16u}) {
      kernel(kBoth, 16 * M - hk * K, hk * K, P, 0, 100);
      kernel(kFlagged, 16 * M - hk * K, hk * K, P, 64 * K, 100);
      kernel(kLL, 16 * M - hk * K, hk * K, P, 0, 100);
    }
  for (size_t hm : {4, 8})
    for (unsigned P : {8u, 16u}) {
      kernel(kBoth, 64 * M - hm * M, hm * M, P, 0, 30);
      kernel(kFlagged, 64 * M - hm * M, hm * M, P, 256 * K, 30);
    }
  puts("== copy engines, host memory (both GPUs: D2H of S into its buffer, then H2D of the peer's, one stream)");
  for (size_t mb : {1, 4, 16})
    for (int both = 0; both < 3; ++both) {
      char name[96];
      const char* what[] = {"ce d2h", "ce h2d", "ce d2h + h2d"};
      snprintf(name, sizeof name, "%-12s %5zu KiB", what[both], (mb * M) >> 10);
      timed(
          name,
          [&](int i, unsigned) {
            if (both != 1) RK(cudaMemcpyAsync(d[i].host, d[i].src, mb * M, cudaMemcpyDeviceToHost, d[i].s));
            if (both != 0) RK(cudaMemcpyAsync(d[i].dst, d[1 - i].host + hbig, mb * M, cudaMemcpyHostToDevice, d[i].s));
          },
          20, 0, double(mb * M));
    }
  puts("== flag round trip, one thread each side");
  unsigned base = 0;
  for (int via_host = 0; via_host < 2; ++via_host) {
    const int iters = 2000;
    float ms[2];
    for (int i = 0; i < 2; ++i) {
      RK(cudaSetDevice(i));
      unsigned* mine = via_host ? d[i].flags + 64 * kMaxChunks : d[i].peer_flag_dev;
      unsigned* theirs = via_host ? d[1 - i].flags + 64 * kMaxChunks : d[1 - i].peer_flag_dev;
      RK(cudaEventRecord(d[i].a, d[i].s));
      ping<<<1, 1, 0, d[i].s>>>(mine, theirs, iters, i == 0, base, d[i].err);
      RK(cudaEventRecord(d[i].b, d[i].s));
    }
    for (int i = 0; i < 2; ++i) {
      RK(cudaSetDevice(i));
      RK(cudaEventSynchronize(d[i].b));
      RK(cudaEventElapsedTime(&ms[i], d[i].a, d[i].b));
    }
    base += iters;
    printf("round trip via %-12s %6.2f us\n", via_host ? "host memory" : "peer memory", ms[0] * 1e3 / iters);
  }
  return 0;
}
