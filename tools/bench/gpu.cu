// CUDA implementation of gpu.hpp: device probe, buffers, streams, the fill kernel, the check
// (through the host reference) and the event/graph timing loops. Only this file (and nccl_loader.cpp) touch the CUDA runtime.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
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

template <typename T> __device__ __forceinline__ T from_double(double v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_double<__half>(double v) { return __float2half(static_cast<float>(v)); }
template <> __device__ __forceinline__ __nv_bfloat16 from_double<__nv_bfloat16>(double v) {
  return __float2bfloat16(static_cast<float>(v));
}
template <typename T>
constexpr bool kFloat = std::is_floating_point_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// The same values as host::fill (pattern.hpp); the inputs are exact in T, so the conversions
// here do not round.
template <typename T>
__global__ void fill_kernel(T* buf, size_t count, Pattern p, size_t offset) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    if constexpr (kFloat<T>) buf[i] = from_double<T>(float_input(p, p.rank, offset + i));
    else buf[i] = static_cast<T>(int_input(p, p.rank, offset + i));
  }
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

// Host copy of the checked output (grown to the largest size checked, then reused).
std::vector<char>& staging() {
  static std::vector<char> v;
  return v;
}

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
  if (sentinel) {
    CK(cudaMemsetAsync(buf, kSentinelByte, count * dtype_size(t), s));
    return;
  }
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<grid_for(count), 256, 0, s>>>(static_cast<T*>(buf), count, p, offset);
  });
  CK(cudaGetLastError());
}

// The output goes to the host and is compared there with the host's reference (written from
// the documented semantics, independently of the kernels under test).
size_t check(const void* buf, size_t count, DataType t, const Pattern& p, void* stream) {
  if (count == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  auto& host = staging();
  const size_t bytes = count * dtype_size(t);
  if (host.size() < bytes) host.resize(bytes);
  CK(cudaMemcpyAsync(host.data(), buf, bytes, cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  return host::check(host.data(), count, t, p);
}

Timing time_calls(void* stream, int warmup, int iters, int graph, const std::function<void()>& one_call,
                  const Verify& verify, bool replay_all) {
  auto s = static_cast<cudaStream_t>(stream);
  Timing t;
  auto checked = [&](const std::function<void()>& launch) {
    if (!verify) return;
    t.wrong = std::max(t.wrong, verify(launch));
    ++t.checks;
  };
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
    checked(one_call);
    for (int i = 0; i < iters; ++i) {
      CK(cudaEventRecord(per.ev[2 * i], s));
      one_call();
      CK(cudaEventRecord(per.ev[2 * i + 1], s));
    }
    CK(cudaStreamSynchronize(s));
    checked(one_call);
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
      // A replay of the timed graph itself: out of place its last call leaves the result (in
      // place the calls reduce each other's output, so only the one-call graph is checkable).
      if (replay_all) checked([&] { CK(cudaGraphLaunch(g.exec, s)); });
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
    checked([&] { CK(cudaGraphLaunch(one.exec, s)); });
  }
  for (int i = 0; i < iters; ++i) calls[i] = per.us(2 * i, 2 * i + 1);
  t.p50_us = host::percentile(calls, 0.50);
  t.p99_us = host::percentile(calls, 0.99);
  return t;
}

}  // namespace actorcc::bench::gpu
