// CUDA implementation of gpu.hpp: device probe, buffers, streams, the fill/check kernels and
// the event/graph timing loops. Only this file (and nccl_loader.cpp) touch the CUDA runtime.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dtype_dispatch.hpp"
#include "gpu.hpp"
#include "host_data.hpp"

namespace actorcc::bench::gpu {
namespace {

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear a sticky-free error so the message is about this call
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(e));
  }
}
#define CK(x) ck((x), #x)

template <typename T> __device__ __forceinline__ T from_double(double v) { return static_cast<T>(static_cast<long long>(v)); }
template <> __device__ __forceinline__ float from_double<float>(double v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ double from_double<double>(double v) { return v; }
template <> __device__ __forceinline__ __half from_double<__half>(double v) { return __float2half(static_cast<float>(v)); }
template <> __device__ __forceinline__ __nv_bfloat16 from_double<__nv_bfloat16>(double v) {
  return __float2bfloat16(static_cast<float>(v));
}

template <typename T> __device__ __forceinline__ double to_double(T v) { return static_cast<double>(v); }
template <> __device__ __forceinline__ double to_double<__half>(__half v) { return static_cast<double>(__half2float(v)); }
template <> __device__ __forceinline__ double to_double<__nv_bfloat16>(__nv_bfloat16 v) {
  return static_cast<double>(__bfloat162float(v));
}

template <typename T>
__global__ void fill_kernel(T* buf, size_t count, Pattern p, size_t offset, bool sentinel) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    buf[i] = from_double<T>(sentinel ? kSentinel : input_value(p.op, p.rank, offset + i));
}

// A value is right when it equals the expected value rounded to T; the mean (avg) of equal
// inputs may differ by rounding of the division, so it gets a relative tolerance `tol`.
template <typename T>
__global__ void check_kernel(const T* buf, size_t count, Pattern p, double tol, unsigned long long* wrong) {
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    double want = to_double<T>(from_double<T>(expected_value(p, i)));
    double got = to_double<T>(buf[i]);
    bool ok = tol > 0 ? fabs(got - want) <= tol * fabs(want) : got == want;
    bad += ok ? 0 : 1;
  }
  if (bad) atomicAdd(wrong, bad);
}

unsigned grid_for(size_t count) {
  size_t blocks = (count + 255) / 256;
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(blocks, 4096)));
}

template <typename F>
void dispatch(DataType t, F&& f) {
  dispatch_dtype<__half, __nv_bfloat16>(t, std::forward<F>(f));
}

struct Events {
  std::vector<cudaEvent_t> ev;
  explicit Events(size_t n) : ev(n, nullptr) {
    for (auto& e : ev) CK(cudaEventCreate(&e));
  }
  ~Events() {
    for (auto e : ev)
      if (e) cudaEventDestroy(e);
  }
  double us(size_t a, size_t b) const {
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, ev[a], ev[b]));
    return static_cast<double>(ms) * 1e3;
  }
};

// Owns a captured graph and its executable form.
struct Graph {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (g) cudaGraphDestroy(g);
  }
};

void capture(cudaStream_t s, int calls, const std::function<void()>& one_call, Graph& out) {
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  try {
    for (int i = 0; i < calls; ++i) one_call();
  } catch (...) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(s, &g);  // leave the stream usable
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();
    throw;
  }
  CK(cudaStreamEndCapture(s, &out.g));
  CK(cudaGraphInstantiate(&out.exec, out.g, 0));
}

unsigned long long* g_counter = nullptr;       // device
unsigned long long* g_counter_host = nullptr;  // pinned

}  // namespace

Probe probe() {
  Probe p;
  p.built_with_cuda = true;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  cudaDriverGetVersion(&p.driver_cuda_version);
  cudaRuntimeGetVersion(&p.runtime_version);
  if (e != cudaSuccess) {
    p.error = cudaGetErrorString(e);
    cudaGetLastError();
    return p;
  }
  for (int i = 0; i < n; ++i) {
    DeviceInfo d;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) {
      d.name = prop.name;
      char u[64];
      const unsigned char* b = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
      std::snprintf(u, sizeof u, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                    b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
      d.uuid = u;
    }
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess) d.pci = bus;
    cudaGetLastError();
    p.devices.push_back(d);
  }
  return p;
}

void set_device(int device) {
  CK(cudaSetDevice(device));
  CK(cudaFree(nullptr));  // create the context now, outside every timed region
  if (!g_counter) {
    CK(cudaMalloc(&g_counter, sizeof(unsigned long long)));
    CK(cudaMallocHost(&g_counter_host, sizeof(unsigned long long)));
  }
}

void* malloc_device(size_t bytes) {
  void* p = nullptr;
  CK(cudaMalloc(&p, std::max<size_t>(bytes, 256)));
  return p;
}
void free_device(void* p) {
  if (p) CK(cudaFree(p));
}
void* stream_create() {
  cudaStream_t s = nullptr;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}
void stream_destroy(void* s) {
  if (s) cudaStreamDestroy(static_cast<cudaStream_t>(s));
}
void stream_sync(void* s) { CK(cudaStreamSynchronize(static_cast<cudaStream_t>(s))); }

void fill(void* buf, size_t count, DataType t, const Pattern& p, size_t offset, bool sentinel, void* stream) {
  if (count == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<grid_for(count), 256, 0, s>>>(static_cast<T*>(buf), count, p, offset, sentinel);
  });
  CK(cudaGetLastError());
}

size_t check(const void* buf, size_t count, DataType t, const Pattern& p, void* stream) {
  if (count == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  CK(cudaMemsetAsync(g_counter, 0, sizeof(unsigned long long), s));
  double tol = check_tolerance(t, p.op);
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    check_kernel<T><<<grid_for(count), 256, 0, s>>>(static_cast<const T*>(buf), count, p, tol, g_counter);
  });
  CK(cudaGetLastError());
  CK(cudaMemcpyAsync(g_counter_host, g_counter, sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  return static_cast<size_t>(*g_counter_host);
}

Timing time_calls(void* stream, int warmup, int iters, int graph, const std::function<void()>& one_call) {
  auto s = static_cast<cudaStream_t>(stream);
  Timing t;
  for (int i = 0; i < warmup; ++i) one_call();
  CK(cudaStreamSynchronize(s));
  Events ends(2);
  Events per(2 * static_cast<size_t>(iters));
  std::vector<double> calls(static_cast<size_t>(iters));
  if (graph <= 0) {
    CK(cudaEventRecord(ends.ev[0], s));
    for (int i = 0; i < iters; ++i) one_call();
    CK(cudaEventRecord(ends.ev[1], s));
    CK(cudaEventSynchronize(ends.ev[1]));
    t.mean_us = ends.us(0, 1) / iters;
    for (int i = 0; i < iters; ++i) {
      CK(cudaEventRecord(per.ev[2 * i], s));
      one_call();
      CK(cudaEventRecord(per.ev[2 * i + 1], s));
    }
    CK(cudaStreamSynchronize(s));
  } else {
    {
      Graph g;
      capture(s, iters, one_call, g);
      CK(cudaGraphLaunch(g.exec, s));  // upload + warm-up
      CK(cudaStreamSynchronize(s));
      CK(cudaEventRecord(ends.ev[0], s));
      for (int k = 0; k < graph; ++k) CK(cudaGraphLaunch(g.exec, s));
      CK(cudaEventRecord(ends.ev[1], s));
      CK(cudaEventSynchronize(ends.ev[1]));
      t.mean_us = ends.us(0, 1) / (static_cast<double>(iters) * graph);
    }
    Graph one;
    capture(s, 1, one_call, one);
    CK(cudaGraphLaunch(one.exec, s));
    CK(cudaStreamSynchronize(s));
    for (int i = 0; i < iters; ++i) {
      CK(cudaEventRecord(per.ev[2 * i], s));
      CK(cudaGraphLaunch(one.exec, s));
      CK(cudaEventRecord(per.ev[2 * i + 1], s));
    }
    CK(cudaStreamSynchronize(s));
  }
  for (int i = 0; i < iters; ++i) calls[i] = per.us(2 * i, 2 * i + 1);
  t.p50_us = host::percentile(calls, 0.50);
  t.p99_us = host::percentile(calls, 0.99);
  return t;
}

}  // namespace actorcc::bench::gpu
