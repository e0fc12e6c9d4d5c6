// Peer write rates of the SM's bulk-copy (TMA) unit against plain SM stores and the copy
// engines, both GPUs writing each other at once: the question behind a TMA data path
// (docs/perf/tuning.md, "not tried: TMA bulk stores"). Plain v4 stores reach ~365 GB/s each way
// and copy engines 383-390; if bulk stores reach the copy-engine rate, and if a per-chunk flag
// (wait for the chunk's bulk group, then st.release.sys) does not slow the SM's other bulk stores
// the way a fence slows plain stores (docs/perf/tuning.md T17-T18), a raw protocol with flags can beat
// LL128's ~342 GB/s of payload at 4-64 MiB.
//
// One process, two visible GPUs with peer access (the rates do not depend on how the mapping
// was made; the library uses VMM between processes).
// build: part of the GPU tier (target tma_rate), or nvcc -std=c++20 -O3 -arch=sm_90 tma_rate.cu
// run: tma_rate (one process that sees both GPUs)
#include <vector>

#include "two_gpus.cuh"

__global__ void sm_copy(uint4* __restrict__ dst, const uint4* __restrict__ src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(unsigned long long* b) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(b)));
}
__device__ __forceinline__ void mbar_expect(unsigned long long* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* b, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}" ::"r"(
          smem_addr(b)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void tma_load(void* s, const void* g, unsigned bytes, unsigned long long* b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(s)),
               "l"(g), "r"(bytes), "r"(smem_addr(b))
               : "memory");
}
__device__ __forceinline__ void tma_store(void* g, const void* s, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(g), "r"(smem_addr(s)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void wait_done() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

constexpr int kStages = 4;

// One thread per CTA streams the CTA's contiguous slice in chunks through kStages smem stages:
// TMA load (global -> smem), TMA store (smem -> peer). flags: after each store, wait until at
// most `lag` chunks are incomplete and raise the flag of the chunk that completed.
template <int Lag>
__global__ void tma_copy(char* dst, const char* src, size_t bytes, unsigned chunk, unsigned* flags, unsigned epoch,
                         bool with_flags) {
  extern __shared__ __align__(128) char stage[];
  __shared__ unsigned long long bar[kStages];
  if (threadIdx.x != 0) return;
  const size_t per = (bytes + gridDim.x - 1) / gridDim.x / 16 * 16 + 16;
  const size_t b0 = min(bytes, blockIdx.x * per), b1 = min(bytes, b0 + per);
  const size_t n = (b1 - b0 + chunk - 1) / chunk;
  for (int s = 0; s < kStages; ++s) mbar_init(&bar[s]);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  auto len = [&](size_t j) { return static_cast<unsigned>(min(size_t(chunk), b1 - b0 - j * chunk)); };
  for (size_t j = 0; j < n && j < kStages; ++j) {
    mbar_expect(&bar[j], len(j));
    tma_load(stage + j * chunk, src + b0 + j * chunk, len(j), &bar[j]);
  }
  for (size_t j = 0; j < n; ++j) {
    const int s = static_cast<int>(j % kStages);
    mbar_wait(&bar[s], static_cast<unsigned>((j / kStages) & 1));
    tma_store(dst + b0 + j * chunk, stage + s * chunk, len(j));
    if (with_flags && j >= Lag) {
      wait_done<Lag>();
      asm volatile("fence.proxy.async.global;" ::: "memory");
      asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(flags + blockIdx.x * 4096 + (j - Lag)), "r"(epoch)
                   : "memory");
    }
    if (j >= 1 && j - 1 + kStages < n) {  // refill the stage chunk j - 1 used
      wait_read<1>();
      const size_t k = j - 1 + kStages;
      const int t = static_cast<int>(k % kStages);
      mbar_expect(&bar[t], len(k));
      tma_load(stage + t * chunk, src + b0 + k * chunk, len(k), &bar[t]);
    }
  }
  wait_done<0>();
  if (with_flags) asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(flags + blockIdx.x * 4096 + n), "r"(epoch));
}

struct Side {
  char* src;
  char* dst;  // on this side, written by the peer
  unsigned* flags;
  cudaStream_t s;
  cudaEvent_t a, b;
};

int main() {
  const size_t big = size_t(256) << 20;
  Side d[2];
  open_both(d, [&](int i) {
    RK(cudaMalloc(&d[i].src, big));
    RK(cudaMalloc(&d[i].dst, big));
    RK(cudaMalloc(&d[i].flags, 528 * 4096 * 4));
    RK(cudaMemset(d[i].src, 1, big));
    RK(cudaFuncSetAttribute(tma_copy<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
    RK(cudaFuncSetAttribute(tma_copy<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
    RK(cudaFuncSetAttribute(tma_copy<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  });
  // kind: 0 SM stores, 1 TMA, 2 TMA + flags (lag 2), 3 flags lag 4, 4 flags lag 1, 5 copy engine
  auto run = [&](const char* name, int kind, size_t bytes, unsigned blocks, unsigned chunk, int iters) {
    double us[2];
    time_both(d, iters, [&](int i, int rep, int it) {
      char* to = d[1 - i].dst;
      const unsigned ep = rep * 100000 + it + 1;
      if (kind == 0)
        sm_copy<<<blocks, 512, 0, d[i].s>>>(reinterpret_cast<uint4*>(to), reinterpret_cast<uint4*>(d[i].src),
                                             bytes / 16);
      else if (kind == 5)
        RK(cudaMemcpyPeerAsync(to, 1 - i, d[i].src, i, bytes, d[i].s));
      else if (kind == 3)
        tma_copy<4><<<blocks, 32, kStages * chunk, d[i].s>>>(to, d[i].src, bytes, chunk, d[1 - i].flags, ep, true);
      else if (kind == 4)
        tma_copy<1><<<blocks, 32, kStages * chunk, d[i].s>>>(to, d[i].src, bytes, chunk, d[1 - i].flags, ep, true);
      else
        tma_copy<2><<<blocks, 32, kStages * chunk, d[i].s>>>(to, d[i].src, bytes, chunk, d[1 - i].flags, ep,
                                                           kind == 2);
    }, us);
    const double us0 = us[0], us1 = us[1];
    printf("%-28s %7zu KiB blocks %3u chunk %6u: %8.2f / %8.2f us per copy, %6.1f / %6.1f GB/s each way\n", name,
           bytes >> 10, blocks, chunk, us0, us1, bytes / us0 / 1e3, bytes / us1 / 1e3);
  };
  const size_t sizes[] = {size_t(4) << 20, size_t(16) << 20, size_t(64) << 20, size_t(256) << 20};
  for (size_t bytes : sizes) {
    const int iters = bytes >= (size_t(64) << 20) ? 20 : 100;
    run("sm v4 stores", 0, bytes, 132, 0, iters);
    run("sm v4 stores", 0, bytes, 264, 0, iters);
    run("copy engine", 5, bytes, 0, 0, iters);
    for (unsigned chunk : {8u << 10, 16u << 10, 32u << 10}) {
      run("tma", 1, bytes, 132, chunk, iters);
      run("tma + flags lag 2", 2, bytes, 132, chunk, iters);
    }
    run("tma", 1, bytes, 264, 16 << 10, iters);
    run("tma + flags lag 2", 2, bytes, 264, 16 << 10, iters);
    run("tma + flags lag 4", 3, bytes, 132, 16 << 10, iters);
    run("tma + flags lag 1", 4, bytes, 132, 16 << 10, iters);
    run("tma + flags lag 4", 3, bytes, 132, 8 << 10, iters);
  }
  // correctness of the copy itself (last case wrote 1s everywhere)
  std::vector<unsigned char> h(1 << 20);
  RK(cudaSetDevice(0));
  RK(cudaMemcpy(h.data(), d[0].dst + (sizes[3] - h.size()), h.size(), cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (unsigned char c : h) bad += c != 1;
  printf("check: %zu wrong bytes in the last MiB\n", bad);
  return 0;
}
