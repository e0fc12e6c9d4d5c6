// gpu_worker: one rank of the GPU test tier (public API only, like a user's actor). Started by
// gpu_launch, which passes ACTORCC_TEST_RANK / _WORLD / _IDS (comma-separated UniqueIds).
//   gpu_worker [--quick] [--no-bench] [--bench-only] [--timeout-test] [--stall-test] [--registered-only]
//              [--shared-gpu] [--mutation-check]
// --mutation-check: only the short matrix that the test-only mutation build must fail.
// --shared-gpu: more ranks than GPUs (gpu_launch --devices 0,1,0,1): sets ACTORCC_CUDA_SHARE_GPU,
// runs the quick matrix without timing and with 20 graph replays / back-to-back rounds, so the
// kernels' 3-8 rank paths run on real GPUs where only 2 are lent.
// Tests: every collective x dtype x op, sizes from 1 element to 64 MiB with odd counts, fresh
// inputs per case, poisoned outputs with guard bytes, in place and out of place, aligned and
// element-misaligned pointers, each all-reduce algorithm forced and the planner's choice; a
// CUDA graph replayed 1000 times; 1000 back-to-back eager calls mixing algorithms; results
// compared exactly with a host reference computed in the kernels' order and precision (fp16/bf16
// inputs whose sums round) and bitwise across ranks. Then a timing table.
// Prints "RESULT rank R cases N failures F" and exits non-zero on any failure.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actorcc/actorcc.hpp"

using namespace actorcc;

#define CK(x)                                                                                       \
  do {                                                                                              \
    cudaError_t e_ = (x);                                                                           \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
      std::exit(10);                                                                                \
    }                                                                                               \
  } while (0)

namespace {

int g_rank = 0, g_world = 1;
long g_cases = 0, g_fail = 0;
cudaStream_t g_stream;
char* d_a = nullptr;  // input buffer
char* d_b = nullptr;  // output buffer
size_t g_buf_bytes = 0;
bool g_shared_gpu = false;  // --shared-gpu: more ranks than GPUs (ACTORCC_CUDA_SHARE_GPU)
constexpr size_t kGuard = 256;

// Graph replays and back-to-back rounds: `full`, 100 with --quick, 20 with --shared-gpu (there
// every exchange with a rank on the same GPU waits for the GPU to switch processes).
long rounds(bool quick, long full = 300) { return g_shared_gpu ? 20 : quick ? 100 : full; }
constexpr uint8_t kPoison = 0xA5;

// ACTORCC_TEST_SAMPLE=K (K > 1): the matrix functions run every K-th case only, starting at
// (world - 1) % K, so the shared-GPU runs of several world sizes (minutes per GPU switch) fit a device
// call and together cover the cases that one run would skip. Every rank skips the same cases.
long g_sample = 1;
unsigned long g_case_seq = 0;
bool sampled_out() {
  const unsigned long k = g_case_seq++;
  return g_sample > 1 && long(k % g_sample) != (g_world - 1) % g_sample;
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool is_float(DataType t) {
  return t == DataType::Float32 || t == DataType::Float16 || t == DataType::BFloat16 || t == DataType::Float64;
}

// Float inputs whose reductions are exact in the kernels' accumulation type (float32; float64
// for double) but ROUND once when stored as fp16/bf16, so accumulating half types in half
// precision would give other bits: m * 2^(e-12) with m of mant_bits(t, world) bits, e in [0, 8)
// (sum, avg, min, max); +-{1, 3, 5, 7}/4 (prod: exact in float32 up to 8 ranks). Integer inputs
// are small, so their sums and products are exact before wrapping.
int mant_bits(DataType t, int world) {
  int lg = 0;
  while ((1 << lg) < world) ++lg;
  const int own = t == DataType::Float16 ? 11 : t == DataType::BFloat16 ? 8 : t == DataType::Float32 ? 24 : 30;
  const int spread = t == DataType::Float64 ? 15 : 7, acc = t == DataType::Float64 ? 53 : 24;
  return std::max(1, std::min(own, acc - spread - lg));
}

double gen(uint64_t seed, int rank, size_t i, DataType t, RedOp op) {
  uint64_t h = mix(seed * 1315423911ull ^ mix(uint64_t(rank) << 40 ^ i));
  if (is_float(t)) {
    const double sign = (h >> 63) ? -1.0 : 1.0;
    if (op == RedOp::Prod) return sign * double(2 * (h % 4) + 1) * 0.25;
    const int e = int((h >> 40) % (t == DataType::Float64 ? 16 : 8));
    const int64_t m = int64_t(h & ((1ull << mant_bits(t, g_world)) - 1));
    return std::ldexp(double(sign < 0 ? -m : m), e - 12);  // m == 0 gives +0
  }
  if (op == RedOp::Prod) {
    if (t == DataType::UInt8) return double(1 + h % 3);
    static const double v[3] = {-1, 1, 2};
    return v[h % 3];
  }
  switch (t) {
    case DataType::Int8: return double(int(h % 41) - 20);
    case DataType::UInt8: return double(h % 41);
    case DataType::Int32: return double(int64_t(h % 200001) - 100000);
    case DataType::Int64: return double(int64_t(h % (1ull << 40)) - int64_t(1ull << 39));
    default: return 0;  // float types returned above
  }
}

void store(void* buf, size_t i, double v, DataType t) {
  switch (t) {
    case DataType::Float32: static_cast<float*>(buf)[i] = float(v); break;
    case DataType::Float16: { __half h = __float2half_rn(float(v)); std::memcpy(static_cast<uint16_t*>(buf) + i, &h, 2); break; }
    case DataType::BFloat16: { __nv_bfloat16 h = __float2bfloat16_rn(float(v)); std::memcpy(static_cast<uint16_t*>(buf) + i, &h, 2); break; }
    case DataType::Float64: static_cast<double*>(buf)[i] = v; break;
    case DataType::Int8: static_cast<int8_t*>(buf)[i] = int8_t(int64_t(v)); break;
    case DataType::UInt8: static_cast<uint8_t*>(buf)[i] = uint8_t(int64_t(v)); break;
    case DataType::Int32: static_cast<int32_t*>(buf)[i] = int32_t(int64_t(v)); break;
    case DataType::Int64: static_cast<int64_t*>(buf)[i] = int64_t(v); break;
  }
}
double load(const void* buf, size_t i, DataType t) {
  switch (t) {
    case DataType::Float32: return static_cast<const float*>(buf)[i];
    case DataType::Float16: { __half h; std::memcpy(&h, static_cast<const uint16_t*>(buf) + i, 2); return __half2float(h); }
    case DataType::BFloat16: { __nv_bfloat16 h; std::memcpy(&h, static_cast<const uint16_t*>(buf) + i, 2); return __bfloat162float(h); }
    case DataType::Float64: return static_cast<const double*>(buf)[i];
    case DataType::Int8: return static_cast<const int8_t*>(buf)[i];
    case DataType::UInt8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::Int32: return static_cast<const int32_t*>(buf)[i];
    case DataType::Int64: return double(static_cast<const int64_t*>(buf)[i]);
  }
  return 0;
}
int64_t load_int(const void* buf, size_t i, DataType t) {
  switch (t) {
    case DataType::Int8: return static_cast<const int8_t*>(buf)[i];
    case DataType::UInt8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::Int32: return static_cast<const int32_t*>(buf)[i];
    default: return static_cast<const int64_t*>(buf)[i];
  }
}
// Wraps an exact integer to the type's width (two's complement), as the library's integer ops do.
int64_t wrap(uint64_t v, DataType t) {
  switch (t) {
    case DataType::Int8: return int8_t(uint8_t(v));
    case DataType::UInt8: return uint8_t(v);
    case DataType::Int32: return int32_t(uint32_t(v));
    default: return int64_t(v);
  }
}

// Reference for element i of the reduction of the world's inputs (each generated from seed).
struct Ref {
  double f = 0;
  int64_t n = 0;
};
Ref reference(uint64_t seed, size_t i, DataType t, RedOp op, int world) {
  Ref r;
  if (is_float(t)) {
    // The kernels' order and precision (src/kernels/reduce_ops.cuh): rank order, float32
    // (float64 for double), avg divided in that type, then rounded once to t.
    auto fold = [&](auto acc) {
      using Acc = decltype(acc);
      for (int k = 0; k < world; ++k) {
        const Acc v = Acc(gen(seed, k, i, t, op));
        if (k == 0) acc = v;
        else if (op == RedOp::Sum || op == RedOp::Avg) acc = acc + v;
        else if (op == RedOp::Prod) acc = acc * v;
        else if (op == RedOp::Min) acc = v < acc ? v : acc;
        else acc = v > acc ? v : acc;
      }
      if (op == RedOp::Avg) acc = acc / Acc(world);
      return double(acc);
    };
    const double wide = t == DataType::Float64 ? fold(0.0) : fold(0.0f);
    uint8_t one[8];
    store(one, 0, wide, t);
    r.f = load(one, 0, t);
  } else {
    uint64_t acc = 0;
    int64_t sacc = 0;
    for (int k = 0; k < world; ++k) {
      int64_t v = int64_t(gen(seed, k, i, t, op));
      if (k == 0) { acc = uint64_t(v); sacc = v; continue; }
      if (op == RedOp::Sum || op == RedOp::Avg) acc += uint64_t(v);
      else if (op == RedOp::Prod) acc *= uint64_t(v);
      else if (op == RedOp::Min) sacc = std::min(sacc, v);
      else sacc = std::max(sacc, v);
    }
    if (op == RedOp::Min || op == RedOp::Max) r.n = sacc;
    else if (op == RedOp::Avg) r.n = wrap(uint64_t(int64_t(acc) / world), t);
    else r.n = wrap(acc, t);
  }
  return r;
}

uint64_t fnv(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ull;
  return h;
}

std::string desc(const char* coll, const std::string& comm, DataType t, RedOp op, size_t count, bool inplace, int mis) {
  std::ostringstream os;
  os << coll << "[" << comm << "] " << to_string(t) << " " << to_string(op) << " n=" << count << (inplace ? " inplace" : "")
     << (mis ? " misaligned" : "");
  return os.str();
}

void fail(const std::string& what) {
  ++g_fail;
  if (g_fail <= 40) std::fprintf(stderr, "rank %d FAIL %s\n", g_rank, what.c_str());
}

// Checks that every rank's output hashes the same (bitwise-identical results).
void check_same_everywhere(Communicator& c, const std::string& what, const void* host, size_t n) {
  auto all = c.allgather_bytes(std::to_string(fnv(host, n)));
  for (auto& s : all)
    if (s != all[0]) { fail(what + ": ranks differ bitwise"); return; }
}

bool guard_ok(const std::vector<uint8_t>& h, size_t from) {
  for (size_t i = from; i < from + kGuard; ++i)
    if (h[i] != kPoison) return false;
  return true;
}

void sync_or_fail(const std::string& what) {
  cudaError_t e = cudaStreamSynchronize(g_stream);
  if (e != cudaSuccess) {
    std::fprintf(stderr, "rank %d: CUDA error after %s: %s\n", g_rank, what.c_str(), cudaGetErrorString(e));
    std::exit(11);
  }
}

// ---- all_reduce ---------------------------------------------------------------------------
void test_allreduce(Communicator& c, const std::string& cname, DataType t, RedOp op, size_t count, bool inplace, int mis,
                    uint64_t seed) {
  if (sampled_out()) return;
  ++g_cases;
  const size_t es = dtype_size(t), bytes = count * es, off = mis ? es : 0;
  std::string what = desc("all_reduce", cname, t, op, count, inplace, mis);
  std::vector<uint8_t> hin(bytes);
  for (size_t i = 0; i < count; ++i) store(hin.data(), i, gen(seed, g_rank, i, t, op), t);
  char* in = d_a + off;
  char* out = d_b + off;
  CK(cudaMemsetAsync(d_b, kPoison, bytes + off + kGuard, g_stream));
  CK(cudaMemcpyAsync(inplace ? out : in, hin.data(), bytes, cudaMemcpyHostToDevice, g_stream));
  try {
    c.all_reduce(inplace ? out : in, out, count, t, op, g_stream);
  } catch (const std::exception& e) {
    fail(what + ": threw " + e.what());
    return;
  }
  sync_or_fail(what);
  std::vector<uint8_t> h(bytes + off + kGuard);
  CK(cudaMemcpy(h.data(), d_b, h.size(), cudaMemcpyDeviceToHost));
  if (!guard_ok(h, bytes + off)) fail(what + ": wrote past the end");
  const uint8_t* o = h.data() + off;
  size_t bad = 0;
  for (size_t i = 0; i < count && bad < 3; ++i) {
    Ref r = reference(seed, i, t, op, g_world);
    if (is_float(t)) {
      double g = load(o, i, t);
      if (!(g == r.f)) {  // exact: the reference is rounded as the kernels round
        std::ostringstream os;
        os << what << ": [" << i << "] got " << g << " want " << r.f;
        fail(os.str());
        ++bad;
      }
    } else if (load_int(o, i, t) != r.n) {
      std::ostringstream os;
      os << what << ": [" << i << "] got " << load_int(o, i, t) << " want " << r.n;
      fail(os.str());
      ++bad;
    }
  }
  check_same_everywhere(c, what, o, bytes);
}

// ---- reduce_scatter -------------------------------------------------------------------------
void test_reduce_scatter(Communicator& c, DataType t, RedOp op, size_t n, bool inplace, uint64_t seed) {
  if (sampled_out()) return;
  ++g_cases;
  const size_t es = dtype_size(t), total = n * g_world;
  std::string what = desc("reduce_scatter", "auto", t, op, n, inplace, 0);
  std::vector<uint8_t> hin(total * es);
  for (size_t i = 0; i < total; ++i) store(hin.data(), i, gen(seed, g_rank, i, t, op), t);
  CK(cudaMemsetAsync(d_b, kPoison, total * es + kGuard, g_stream));
  char* send = inplace ? d_b : d_a;
  char* recv = inplace ? d_b + g_rank * n * es : d_b;
  CK(cudaMemcpyAsync(send, hin.data(), total * es, cudaMemcpyHostToDevice, g_stream));
  try {
    c.reduce_scatter(send, recv, n, t, op, g_stream);
  } catch (const std::exception& e) {
    fail(what + ": threw " + e.what());
    return;
  }
  sync_or_fail(what);
  std::vector<uint8_t> h(n * es + kGuard);
  CK(cudaMemcpy(h.data(), recv, h.size(), cudaMemcpyDeviceToHost));
  if (!inplace && !guard_ok(h, n * es)) fail(what + ": wrote past the end");
  size_t bad = 0;
  for (size_t i = 0; i < n && bad < 3; ++i) {
    Ref r = reference(seed, g_rank * n + i, t, op, g_world);
    bool ok = is_float(t) ? load(h.data(), i, t) == r.f : load_int(h.data(), i, t) == r.n;
    if (!ok) {
      std::ostringstream os;
      os << what << ": [" << i << "] got " << load(h.data(), i, t) << " want " << (is_float(t) ? r.f : double(r.n));
      fail(os.str());
      ++bad;
    }
  }
}

// ---- all_gather ---------------------------------------------------------------------------
void test_all_gather(Communicator& c, DataType t, size_t n, bool inplace, int mis, uint64_t seed) {
  if (sampled_out()) return;
  ++g_cases;
  const size_t es = dtype_size(t), total = n * g_world, off = mis ? es : 0;
  std::string what = desc("all_gather", "auto", t, RedOp::Sum, n, inplace, mis);
  std::vector<uint8_t> hin(n * es);
  for (size_t i = 0; i < n; ++i) store(hin.data(), i, gen(seed, g_rank, i, t, RedOp::Sum), t);
  CK(cudaMemsetAsync(d_b, kPoison, total * es + off + kGuard, g_stream));
  char* recv = d_b + off;
  char* send = inplace ? recv + g_rank * n * es : d_a + off;
  CK(cudaMemcpyAsync(send, hin.data(), n * es, cudaMemcpyHostToDevice, g_stream));
  try {
    c.all_gather(send, recv, n, t, g_stream);
  } catch (const std::exception& e) {
    fail(what + ": threw " + e.what());
    return;
  }
  sync_or_fail(what);
  std::vector<uint8_t> h(total * es + off + kGuard);
  CK(cudaMemcpy(h.data(), d_b, h.size(), cudaMemcpyDeviceToHost));
  if (!guard_ok(h, total * es + off)) fail(what + ": wrote past the end");
  std::vector<uint8_t> want(es);
  size_t bad = 0;
  for (int k = 0; k < g_world && bad < 3; ++k)
    for (size_t i = 0; i < n && bad < 3; ++i) {
      store(want.data(), 0, gen(seed, k, i, t, RedOp::Sum), t);
      if (std::memcmp(want.data(), h.data() + off + (k * n + i) * es, es) != 0) {
        std::ostringstream os;
        os << what << ": block " << k << " [" << i << "] wrong";
        fail(os.str());
        ++bad;
      }
    }
}

// ---- broadcast ----------------------------------------------------------------------------
void test_broadcast(Communicator& c, DataType t, size_t n, int root, bool inplace, uint64_t seed) {
  if (sampled_out()) return;
  ++g_cases;
  const size_t es = dtype_size(t);
  std::string what = desc("broadcast", "root" + std::to_string(root), t, RedOp::Sum, n, inplace, 0);
  std::vector<uint8_t> hin(n * es);
  for (size_t i = 0; i < n; ++i) store(hin.data(), i, gen(seed, root, i, t, RedOp::Sum), t);
  CK(cudaMemsetAsync(d_b, kPoison, n * es + kGuard, g_stream));
  char* send = inplace ? d_b : d_a;
  if (g_rank == root) CK(cudaMemcpyAsync(send, hin.data(), n * es, cudaMemcpyHostToDevice, g_stream));
  try {
    c.broadcast(g_rank == root ? send : (inplace ? d_b : d_a), d_b, n, t, root, g_stream);
  } catch (const std::exception& e) {
    fail(what + ": threw " + e.what());
    return;
  }
  sync_or_fail(what);
  std::vector<uint8_t> h(n * es + kGuard);
  CK(cudaMemcpy(h.data(), d_b, h.size(), cudaMemcpyDeviceToHost));
  if (!guard_ok(h, n * es)) fail(what + ": wrote past the end");
  if (std::memcmp(h.data(), hin.data(), n * es) != 0) fail(what + ": wrong data");
}

// ---- graphs and back-to-back calls --------------------------------------------------------
template <typename I>
__global__ void add_one(I* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] += 1;
}
template <typename I>
__global__ void accum(int64_t* acc, const I* x, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) acc[i] += x[i];
}

// in += 1; out = all_reduce(in); acc += out (exact). int64 chains, or int32 ones (4-byte
// elements fill the LL128 lines' 12-byte flag-lane parts, 8-byte ones 8 bytes; values stay far
// below 2^31).
struct Chain {
  size_t n;
  bool i32;
  void *in, *out;
  int64_t* acc;
  uint64_t seed;
  Chain(size_t n_, uint64_t s, bool int32 = false) : n(n_), i32(int32), seed(s) {
    const size_t es = i32 ? 4 : 8;
    CK(cudaMalloc(&in, n * es));
    CK(cudaMalloc(&out, n * es));
    CK(cudaMalloc(&acc, n * 8));
    std::vector<int64_t> h(n);
    std::vector<int32_t> h32(n);
    for (size_t i = 0; i < n; ++i) h32[i] = int32_t(h[i] = int64_t(mix(seed ^ mix(g_rank * 1000003ull + i)) % 1000));
    CK(cudaMemcpy(in, i32 ? static_cast<void*>(h32.data()) : h.data(), n * es, cudaMemcpyHostToDevice));
    CK(cudaMemset(acc, 0, n * 8));
  }
  ~Chain() { cudaFree(in); cudaFree(out); cudaFree(acc); }
  void enqueue(Communicator& c) {
    if (i32) {
      add_one<<<64, 256, 0, g_stream>>>(static_cast<int32_t*>(in), n);
      c.all_reduce(in, out, n, DataType::Int32, RedOp::Sum, g_stream);
      accum<<<64, 256, 0, g_stream>>>(acc, static_cast<const int32_t*>(out), n);
    } else {
      add_one<<<64, 256, 0, g_stream>>>(static_cast<int64_t*>(in), n);
      c.all_reduce(in, out, n, DataType::Int64, RedOp::Sum, g_stream);
      accum<<<64, 256, 0, g_stream>>>(acc, static_cast<const int64_t*>(out), n);
    }
  }
  void verify(Communicator& c, const std::string& what, long reps) {
    ++g_cases;
    std::vector<int64_t> h(n);
    CK(cudaMemcpy(h.data(), acc, n * 8, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) {
      int64_t s0 = 0;
      for (int k = 0; k < g_world; ++k) s0 += int64_t(mix(seed ^ mix(k * 1000003ull + i)) % 1000);
      int64_t want = reps * s0 + int64_t(g_world) * reps * (reps + 1) / 2;
      if (h[i] != want) {
        std::ostringstream os;
        os << what << " n=" << n << ": [" << i << "] got " << h[i] << " want " << want;
        fail(os.str());
        return;
      }
    }
    check_same_everywhere(c, what, h.data(), n * 8);
  }
};

// ---- bad buffers ---------------------------------------------------------------------------
// Host memory or a null pointer must be refused before any kernel runs (a kernel touching them
// would poison the context), with an error naming the buffer. Each rank passes a different bad
// buffer; a refusal aborts the group (docs/reliability.md), so a later call raises at once,
// naming a rank that refused and why.
void test_bad_buffers(Communicator& c) {
  std::vector<float> host(1024, 1.0f);
  void* dev = nullptr;
  if (cudaMalloc(&dev, host.size() * sizeof(float)) != cudaSuccess) return fail("cudaMalloc for bad-buffer test");
  const char* what[] = {"host send", "host recv", "null recv"};
  const void* send[] = {host.data(), dev, dev};
  void* recv[] = {dev, host.data(), nullptr};
  const int k = g_rank % 3;
  ++g_cases;
  try {
    c.all_reduce(send[k], recv[k], host.size(), DataType::Float32, RedOp::Sum, g_stream);
    fail(std::string("bad buffer accepted: ") + what[k]);
  } catch (const InvalidArgument& e) {
    if (std::string(e.what()).find("buffer") == std::string::npos) fail(std::string("unclear error for ") + what[k] + ": " + e.what());
  }
  try {
    c.all_reduce(dev, dev, host.size(), DataType::Float32, RedOp::Sum, g_stream);
    fail("a call after a refused bad buffer ran on the aborted group");
  } catch (const RemoteError& e) {
    if (std::string(e.what()).find("bad argument") == std::string::npos) fail(std::string("unclear abort after a bad buffer: ") + e.what());
  }
  cudaFree(dev);
}

// ---- CUDA graphs --------------------------------------------------------------------------
// Captures what `enqueue` puts on g_stream into an instantiated graph; destroyed with the object.
class CapturedGraph {
 public:
  template <typename F>
  explicit CapturedGraph(F&& enqueue) {
    CK(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal));
    enqueue();
    CK(cudaStreamEndCapture(g_stream, &graph_));
    CK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~CapturedGraph() {
    CK(cudaGraphExecDestroy(exec_));
    CK(cudaGraphDestroy(graph_));
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  void launch() const { CK(cudaGraphLaunch(exec_, g_stream)); }

 private:
  cudaGraph_t graph_{};
  cudaGraphExec_t exec_{};
};

void test_graph(Communicator& c, long replays) {
  std::vector<std::unique_ptr<Chain>> chains;
  for (size_t n : {size_t(1), size_t(1000), size_t(65536 + 3), size_t(2 << 20)})
    chains.push_back(std::make_unique<Chain>(n, 77 + n));
  for (size_t n : {size_t(65536 + 5), size_t(262144 + 1)}) chains.push_back(std::make_unique<Chain>(n, 55 + n, true));
  const size_t agn = 4099;
  int64_t *ag_out, *ag_acc;
  CK(cudaMalloc(&ag_out, agn * g_world * 8));
  CK(cudaMalloc(&ag_acc, agn * g_world * 8));
  CK(cudaMemset(ag_acc, 0, agn * g_world * 8));
  CK(cudaStreamSynchronize(g_stream));
  CapturedGraph graph([&] {
    for (auto& ch : chains) ch->enqueue(c);
    c.all_gather(chains[1]->in, ag_out, agn < chains[1]->n ? agn : chains[1]->n, DataType::Int64, g_stream);
    accum<<<64, 256, 0, g_stream>>>(ag_acc, ag_out, std::min(agn, chains[1]->n) * g_world);
    c.barrier(g_stream);
  });
  auto t0 = std::chrono::steady_clock::now();
  for (long r = 0; r < replays; ++r) graph.launch();
  sync_or_fail("graph replays");
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (auto& ch : chains) ch->verify(c, "graph x" + std::to_string(replays), replays);
  // all_gather of chain 1's input (n = 1000 elements): acc = R*init_k + R(R+1)/2
  {
    ++g_cases;
    size_t m = std::min(agn, chains[1]->n);
    std::vector<int64_t> h(m * g_world);
    CK(cudaMemcpy(h.data(), ag_acc, h.size() * 8, cudaMemcpyDeviceToHost));
    for (int k = 0; k < g_world; ++k)
      for (size_t i = 0; i < m; ++i) {
        int64_t init = int64_t(mix(chains[1]->seed ^ mix(k * 1000003ull + i)) % 1000);
        int64_t want = replays * init + replays * (replays + 1) / 2;
        if (h[k * m + i] != want) {
          fail("graph all_gather: block " + std::to_string(k) + " wrong");
          k = g_world;
          break;
        }
      }
  }
  if (g_rank == 0) std::printf("graph: %ld replays of 4 all_reduce + all_gather + barrier in %.1f ms\n", replays, ms);
  cudaFree(ag_out);
  cudaFree(ag_acc);
}

// `register_some`: the outputs of chains 1 and 3 are registered, so registered (direct) and
// workspace calls of the pipelined two-shot alternate back to back.
void test_back_to_back(Communicator& c, long calls, bool register_some = false) {
  std::vector<std::unique_ptr<Chain>> chains;
  for (size_t n : {size_t(3), size_t(4096), size_t(131072 + 1), size_t(4 << 20)})
    chains.push_back(std::make_unique<Chain>(n, 99 + n));
  for (size_t n : {size_t(131072 + 3), size_t(262144 + 7)}) chains.push_back(std::make_unique<Chain>(n, 33 + n, true));
  if (register_some)
    for (size_t k : {1, 3}) c.register_buffer(chains[k]->out, chains[k]->n * 8);
  CK(cudaStreamSynchronize(g_stream));
  auto t0 = std::chrono::steady_clock::now();
  for (long r = 0; r < calls; ++r)
    for (size_t k = 0; k < chains.size(); ++k)
      if (k != 3 || r % 10 == 0) chains[k]->enqueue(c);  // the 32 MiB one every 10th round
  sync_or_fail("back-to-back");
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (size_t k = 0; k < chains.size(); ++k)
    chains[k]->verify(c, std::string(register_some ? "registered " : "") + "eager x" + std::to_string(calls),
                      k != 3 ? calls : (calls + 9) / 10);
  if (register_some)
    for (size_t k : {3, 1}) c.deregister_buffer(chains[k]->out);
  if (g_rank == 0) std::printf("back-to-back: %ld rounds in %.1f ms\n", calls, ms);
}

// ---- timing -------------------------------------------------------------------------------
void bench(Communicator& c, const std::string& name, const std::vector<size_t>& sizes, bool registered = false) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (size_t bytes : sizes) {
    if (bytes > g_buf_bytes) continue;
    size_t n = bytes / 4;
    int iters = bytes <= (1 << 20) ? 300 : bytes <= (16 << 20) ? 60 : 12;
    for (int i = 0; i < 5; ++i) c.all_reduce(d_a, d_b, n, DataType::Float32, RedOp::Sum, g_stream);
    sync_or_fail("bench warmup");
    c.host_barrier();
    CK(cudaEventRecord(a, g_stream));
    for (int i = 0; i < iters; ++i) c.all_reduce(d_a, d_b, n, DataType::Float32, RedOp::Sum, g_stream);
    CK(cudaEventRecord(b, g_stream));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    double eager = ms * 1e3 / iters;
    // graph: `iters` calls captured once, replayed 3 times
    CapturedGraph graph_calls(
        [&] { for (int i = 0; i < iters; ++i) c.all_reduce(d_a, d_b, n, DataType::Float32, RedOp::Sum, g_stream); });
    graph_calls.launch();
    sync_or_fail("bench graph warmup");
    c.host_barrier();
    CK(cudaEventRecord(a, g_stream));
    for (int r = 0; r < 3; ++r) graph_calls.launch();
    CK(cudaEventRecord(b, g_stream));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms, a, b));
    double graph = ms * 1e3 / (3.0 * iters);
    double busbw = bytes / (std::min(eager, graph) * 1e-6) / 1e9 * 2.0 * (g_world - 1) / g_world;
    if (g_rank == 0)
      std::printf("TIME %-14s %-13s %11zu %10.2f %10.2f %8.1f\n", name.c_str(), c.plan(Collective::AllReduce, bytes, registered).c_str(),
                  bytes, eager, graph, busbw);
    std::fflush(stdout);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

// ---- stall test (--stall-test) ----------------------------------------------------------
// An all-reduce call must not stay slow after one rank was late once. Rank 1 delays its stream
// by `skew_us` (a spin kernel) right before 5 back-to-back replays of a 20-call graph; every
// replay after the first must run at the normal speed. Then 20 eager calls, timed one by one.
__global__ void spin_us_kernel(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}
// Every thread reads one host-mapped word once (what every waiting thread of the LL one-shot
// did at each spin check).
__global__ void host_read_kernel(const volatile int* w, int* sink) {
  if (*w == 12345) *sink = 1;
}
// Every thread polls its own 16-byte line 1024 times (the LL wait loop between two checks).
__global__ void poll_kernel(const uint4* lines, int* sink) {
  const volatile uint4* p = lines + blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  unsigned acc = 0;
  for (int i = 0; i < 1024; ++i) {
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    acc += v.y;
  }
  if (acc == 0xdeadbeef) *sink = 1;
}

double time_kernel_us(const std::function<void()>& launch, int reps = 5) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  launch();
  CK(cudaStreamSynchronize(g_stream));
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a, g_stream));
    launch();
    CK(cudaEventRecord(b, g_stream));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    best = std::min(best, ms * 1e3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

void stall_micro() {
  int* hw = nullptr;
  int* dhw = nullptr;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&hw), 64, cudaHostAllocMapped | cudaHostAllocPortable));
  *hw = 0;
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dhw), hw, 0));
  int* sink = reinterpret_cast<int*>(d_b);
  double storm = time_kernel_us([&] { host_read_kernel<<<128, 512, 0, g_stream>>>(dhw, sink); });
  double one = time_kernel_us([&] { host_read_kernel<<<128, 1, 0, g_stream>>>(dhw, sink); });
  double one1 = time_kernel_us([&] { host_read_kernel<<<1, 1, 0, g_stream>>>(dhw, sink); });
  double poll = time_kernel_us([&] { poll_kernel<<<128, 512, 0, g_stream>>>(reinterpret_cast<const uint4*>(d_a), sink); });
  double poll64 = time_kernel_us([&] { poll_kernel<<<64, 512, 0, g_stream>>>(reinterpret_cast<const uint4*>(d_a), sink); });
  std::printf("MICRO rank %d: host-word read by 128x512 thr %.1f us, 128x1 %.1f us, 1x1 %.1f us; 1024 LL polls 128x512 %.1f us, 64x512 %.1f us\n",
              g_rank, storm, one, one1, poll, poll64);
  std::fflush(stdout);
  cudaFreeHost(hw);
}

void stall_test(Communicator& c, const std::string& label, size_t bytes, const std::vector<int>& skews) {
  const size_t n = bytes / 4;
  const int calls = 20, replays = 5;
  for (int i = 0; i < 5; ++i) c.all_reduce(d_a, d_b, n, DataType::Float32, RedOp::Sum, g_stream);
  sync_or_fail("stall warmup");
  CapturedGraph graph(
      [&] { for (int i = 0; i < calls; ++i) c.all_reduce(d_a, d_b, n, DataType::Float32, RedOp::Sum, g_stream); });
  graph.launch();
  sync_or_fail("stall graph warmup");
  std::vector<cudaEvent_t> ev(2 * calls + replays + 1);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int skew : skews) {
    c.host_barrier();
    if (g_rank == 1 && skew > 0) spin_us_kernel<<<1, 1, 0, g_stream>>>(skew * 1000ull);
    CK(cudaEventRecord(ev[0], g_stream));
    for (int r = 0; r < replays; ++r) {
      graph.launch();
      CK(cudaEventRecord(ev[1 + r], g_stream));
    }
    CK(cudaStreamSynchronize(g_stream));
    std::vector<double> rep(replays);
    for (int r = 0; r < replays; ++r) {
      float ms;
      CK(cudaEventElapsedTime(&ms, ev[r], ev[r + 1]));
      rep[r] = ms * 1e3 / calls;
    }
    // eager, one event pair per call (no sync between calls), right after a skew again
    c.host_barrier();
    if (g_rank == 1 && skew > 0) spin_us_kernel<<<1, 1, 0, g_stream>>>(skew * 1000ull);
    std::vector<cudaEvent_t> pe(ev.begin() + replays + 1, ev.end());
    for (int i = 0; i < calls; ++i) {
      CK(cudaEventRecord(pe[2 * i], g_stream));
      c.all_reduce(d_a, d_b, n, DataType::Float32, RedOp::Sum, g_stream);
      CK(cudaEventRecord(pe[2 * i + 1], g_stream));
    }
    sync_or_fail("stall eager");
    std::vector<double> per(calls);
    for (int i = 0; i < calls; ++i) {
      float ms;
      CK(cudaEventElapsedTime(&ms, pe[2 * i], pe[2 * i + 1]));
      per[i] = ms * 1e3;
    }
    std::vector<double> tail(per.begin() + 1, per.end());
    std::sort(tail.begin(), tail.end());
    std::ostringstream os;
    for (double x : rep) os << x << ' ';
    os << per[0] << ' ' << tail[tail.size() / 2] << ' ' << tail.back();
    auto all = c.allgather_bytes(os.str());
    if (g_rank == 0) {
      std::vector<double> mx(replays + 3, 0);
      for (auto& s : all) {
        std::istringstream is(s);
        for (auto& m : mx) {
          double v;
          is >> v;
          m = std::max(m, v);
        }
      }
      std::printf("STALL %-22s %8zu B skew %5d us | graph us/call per replay:", label.c_str(), bytes, skew);
      for (int r = 0; r < replays; ++r) std::printf(" %8.2f", mx[r]);
      std::printf(" | eager call0 %8.2f, calls1-19 p50 %8.2f max %8.2f\n", mx[replays], mx[replays + 1], mx[replays + 2]);
      std::fflush(stdout);
    }
  }
  for (auto& e : ev) cudaEventDestroy(e);
}

void bench_other(Communicator& c) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (size_t bytes : {size_t(65536), size_t(1 << 20), size_t(16 << 20), size_t(64 << 20)}) {
    if (bytes * g_world > g_buf_bytes) continue;
    for (Collective coll : {Collective::AllGather, Collective::ReduceScatter, Collective::Broadcast}) {
      size_t n = bytes / 4;
      int iters = bytes <= (1 << 20) ? 200 : 20;
      auto call = [&] {
        if (coll == Collective::AllGather) c.all_gather(d_a, d_b, n / g_world, DataType::Float32, g_stream);
        else if (coll == Collective::ReduceScatter)
          c.reduce_scatter(d_a, d_b, n / g_world, DataType::Float32, RedOp::Sum, g_stream);
        else c.broadcast(d_a, d_b, n, DataType::Float32, 0, g_stream);
      };
      for (int i = 0; i < 3; ++i) call();
      sync_or_fail("bench other warmup");
      c.host_barrier();
      CK(cudaEventRecord(a, g_stream));
      for (int i = 0; i < iters; ++i) call();
      CK(cudaEventRecord(b, g_stream));
      CK(cudaEventSynchronize(b));
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      double us = ms * 1e3 / iters;
      double bus = bytes / (us * 1e-6) / 1e9 * (coll == Collective::Broadcast ? 1.0 : double(g_world - 1) / g_world);
      if (g_rank == 0)
        std::printf("TIME %-14s %-13s %11zu %10.2f %10s %8.1f\n", std::string(to_string(coll)).c_str(),
                    c.plan(coll, bytes).c_str(), bytes, us, "-", bus);
    }
  }
  std::fflush(stdout);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) v.push_back(x);
  return v;
}

std::unique_ptr<Communicator> make_comm(const std::string& id, const std::string& algo,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  Options o;
  o.backend = Backend::Cuda;
  o.algo = algo;
  o.timeout = timeout;
  o.join_timeout = std::chrono::seconds(60);
  return std::make_unique<Communicator>(UniqueId::parse(id), g_rank, g_world, o);
}

// Sets `env` for its lifetime; each variable gets back its earlier value (or is removed again)
// at the end, also when the communicator's creation throws.
using EnvList = std::vector<std::pair<const char*, const char*>>;
class ScopedEnv {
 public:
  explicit ScopedEnv(const EnvList& env) {
    for (auto& [name, value] : env) {
      const char* old = std::getenv(name);
      before_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    for (auto& [name, old] : before_)
      if (old) setenv(name, old->c_str(), 1);
      else unsetenv(name);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> before_;
};

// A communicator made while `env` is set (settings are read at creation; rank 0's win).
std::unique_ptr<Communicator> make_comm_with(const std::string& id, const std::string& algo, const EnvList& env) {
  const ScopedEnv scoped(env);
  return make_comm(id, algo);
}

// Rank 1 passes an output that is not the registered buffer rank 0 uses: the pipe must refuse
// the call on both ranks (InvalidArgument at the next call, naming the registration) rather
// than store into memory rank 1 did not offer, and nothing may hang.
void test_registration_mismatch(const std::string& id) {
  ++g_cases;
  auto c = make_comm(id, "twoshot_pipe");
  c->register_buffer(d_b, g_buf_bytes + 4096);
  char* other = nullptr;
  const size_t n = 1 << 20;
  CK(cudaMalloc(&other, n * sizeof(float)));
  try {
    c->all_reduce(d_a, g_rank == 1 ? other : d_b, n, DataType::Float32, RedOp::Sum, g_stream);
    cudaStreamSynchronize(g_stream);
    c->all_reduce(d_a, d_b, 1024, DataType::Float32, RedOp::Sum, g_stream);
    cudaStreamSynchronize(g_stream);
    fail("registration mismatch: no error");
  } catch (const InvalidArgument& e) {
    if (std::string(e.what()).find("registered") == std::string::npos) fail(std::string("unclear mismatch error: ") + e.what());
    else if (g_rank == 0) std::printf("registration mismatch: %s\n", e.what());
  } catch (const std::exception& e) {
    fail(std::string("registration mismatch: wrong error: ") + e.what());
  }
  cudaGetLastError();
  cudaFree(other);
}

// Without ACTORCC_CUDA_SHARE_GPU, ranks sharing a GPU are refused, on every rank, with an error
// that says so, and not handed to NCCL (which refuses them too, and only on the ranks that share:
// the others then waited in its setup); nothing hangs.
void refused_without_share_setting(const std::string& id) {
  ++g_cases;
  try {
    auto c = make_comm_with(id, "", {{"ACTORCC_CUDA_SHARE_GPU", "0"}});
    fail("ranks sharing a GPU were accepted without the setting (plan: " + c->plan(Collective::AllReduce, 4096) + ")");
  } catch (const std::exception& e) {
    if (std::string(e.what()).find("share GPU") == std::string::npos)
      fail(std::string("shared GPU refused with an unclear error: ") + e.what());
    else if (g_rank == 0) std::printf("shared GPU without the setting: %s\n", e.what());
  }
}

}  // namespace

// ---- all-reduce sweeps ----------------------------------------------------------------------
constexpr DataType kTypes[] = {DataType::Float32, DataType::Float16, DataType::BFloat16, DataType::Float64,
                               DataType::Int8,    DataType::UInt8,   DataType::Int32,    DataType::Int64};
constexpr RedOp kOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::Avg};
// With --shared-gpu beyond 4 ranks (3-4 processes per GPU, every exchange several process
// switches) one type per element size and three ops, so the matrix fits its time.
std::vector<DataType> test_types() {
  if (g_shared_gpu && g_world > 4) return {DataType::Int8, DataType::Float16, DataType::Float32, DataType::Int64};
  return {std::begin(kTypes), std::end(kTypes)};
}
std::vector<RedOp> test_ops() {
  if (g_shared_gpu && g_world > 4) return {RedOp::Sum, RedOp::Min, RedOp::Avg};
  return {std::begin(kOps), std::end(kOps)};
}

// Every dtype x op x size through `c` (the cases `keep` admits): out of place, in place for
// float32 and bfloat16, and element-misaligned where misaligned_at(n). One seed per case.
template <typename Keep, typename Misaligned>
void allreduce_sweep(Communicator& c, const std::string& name, const std::vector<size_t>& sizes, uint64_t& seed,
                     Keep keep, Misaligned misaligned_at) {
  for (DataType t : test_types())
    for (RedOp op : test_ops())
      for (size_t n : sizes) {
        if (!keep(t, op, n)) continue;
        test_allreduce(c, name, t, op, n, false, 0, seed++);
        if (t == DataType::Float32 || t == DataType::BFloat16) test_allreduce(c, name, t, op, n, true, 0, seed++);
        if (misaligned_at(n)) test_allreduce(c, name, t, op, n, false, 1, seed++);
      }
}
// Sizes above 2 Mi elements only for sum and avg (enough coverage, saves time).
bool large_only_sum_avg(DataType, RedOp op, size_t n) {
  return n <= (2u << 20) || op == RedOp::Sum || op == RedOp::Avg;
}

// A forced algorithm over every dtype x op from 1 element to 300001 (and 8 Mi + 1 for sum when
// `big`), in place, element-misaligned at 17 and 65537 elements.
void forced_sweep(Communicator& c, const std::string& name, bool big, uint64_t& seed) {
  std::vector<size_t> sizes = {1, 3, 17, 1000, 4097, 65537, 300001};
  if (big) sizes.push_back((8u << 20) + 1);
  allreduce_sweep(
      c, name, sizes, seed, [](DataType, RedOp op, size_t n) { return n <= 300000 || op == RedOp::Sum; },
      [](size_t n) { return n == 17 || n == 65537; });
}

// The planner-mixed groups' common sweep (sizes from LL to above 1 MiB; 8 Mi+1 elements unless
// quick), then a graph and back-to-back rounds.
void mixed_sweep(Communicator& c, const std::string& name, bool quick, uint64_t& seed) {
  std::vector<size_t> sizes = {5000, 65543, 300001, (1u << 20) + 5};
  if (!quick) sizes.push_back((8u << 20) + 1);
  allreduce_sweep(c, name, sizes, seed, large_only_sum_avg, [](size_t n) { return n == 65543; });
  test_graph(c, rounds(quick));
  test_back_to_back(c, rounds(quick));
  if (g_rank == 0) std::printf("all_reduce[%s mixed]: total %ld cases, %ld failures\n", name.c_str(), g_cases, g_fail);
}

// Registers the worker's input and output buffers (whole allocations) with c.
void register_test_buffers(Communicator& c) {
  c.register_buffer(d_a, g_buf_bytes + 4096);
  c.register_buffer(d_b, g_buf_bytes + 4096);
}

// Registered outputs: the pipe (16 KiB tiles: many direct all-gather tiles per CTA) storing
// straight into the peers' outputs, forced over every dtype x op, in place, misaligned, graph
// x300; then the planner (registered calls from 1 MiB take it) mixed with LL / LL128; then
// deregistration (the workspace path again); then a call whose ranks disagree.
void registered_groups(const std::vector<std::string>& ids, bool quick, uint64_t& seed) {
  {
    auto c = make_comm_with(ids[21], "twoshot_pipe",
                            {{"ACTORCC_CUDA_PIPE_TILE", "16384"}, {"ACTORCC_CUDA_MIN_TILE", "4096"}});
    register_test_buffers(*c);
    forced_sweep(*c, "pipe_registered", !quick, seed);
    test_graph(*c, rounds(quick));
    test_back_to_back(*c, rounds(quick));
    test_back_to_back(*c, rounds(quick), true);
    c->deregister_buffer(d_b);
    test_allreduce(*c, "pipe_deregistered", DataType::Float32, RedOp::Sum, 300001, false, 0, seed++);
    c->deregister_buffer(d_a);
    if (g_rank == 0) std::printf("all_reduce[pipe_registered]: total %ld cases, %ld failures\n", g_cases, g_fail);
  }
  {
    auto c = make_comm_with(ids[22], "", {{"ACTORCC_CUDA_REG_PIPE_MIN", "1048576"}});
    register_test_buffers(*c);
    // plan() tells the registered route apart (2 ranks: the pipe from REG_PIPE_MIN).
    ++g_cases;
    const std::string reg = c->plan(Collective::AllReduce, 2 << 20, true), plain = c->plan(Collective::AllReduce, 2 << 20);
    if (g_world == 2 && (reg != "twoshot_pipe" || plain == "twoshot_pipe"))
      fail("plan(all_reduce, 2 MiB): registered '" + reg + "', not registered '" + plain + "'");
    mixed_sweep(*c, "auto_registered", quick, seed);
    test_back_to_back(*c, rounds(quick), true);
  }
  test_registration_mismatch(ids[23]);
}

int main(int argc, char** argv) {
  bool quick = false, do_bench = true, bench_only = false, timeout_test = false, stall = false, reg_only = false;
  bool mut_check = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--no-bench") do_bench = false;
    else if (a == "--bench-only") bench_only = true;
    else if (a == "--timeout-test") timeout_test = true;
    else if (a == "--stall-test") stall = true;
    else if (a == "--registered-only") reg_only = true;
    else if (a == "--shared-gpu") g_shared_gpu = quick = true, do_bench = false;
    else if (a == "--mutation-check") mut_check = true, do_bench = false;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines survive a kill by the caller's timeout
  const char* r = std::getenv("ACTORCC_TEST_RANK");
  const char* w = std::getenv("ACTORCC_TEST_WORLD");
  const char* ids_env = std::getenv("ACTORCC_TEST_IDS");
  if (!r || !w || !ids_env) {
    std::fprintf(stderr, "gpu_worker must be started by gpu_launch\n");
    return 2;
  }
  g_rank = std::atoi(r);
  g_world = std::atoi(w);
  if (const char* k = std::getenv("ACTORCC_TEST_SAMPLE")) g_sample = std::max(1L, std::atol(k));
  if (g_shared_gpu) setenv("ACTORCC_CUDA_SHARE_GPU", "1", 1);
  auto ids = split(ids_env);
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  g_buf_bytes = size_t(1) << 30;  // the timing table goes up to 1 GiB
  CK(cudaMalloc(&d_a, g_buf_bytes + 4096));
  CK(cudaMalloc(&d_b, g_buf_bytes + 4096));
  CK(cudaMemset(d_a, 0, g_buf_bytes));
  auto t_start = std::chrono::steady_clock::now();
  int exit_code = 0;
  try {
    const auto types = test_types();
    const auto ops = test_ops();
    uint64_t seed = 1;
    if (stall && g_world > 1) {
      // Variants: (label, env settings, bytes). Each gets its own communicator (ids 0..).
      struct SV { const char* label; EnvList env; size_t bytes; };
      const std::vector<SV> vs = {
          {"fix", {}, 1 << 20},
          {"old_abort_poll", {{"ACTORCC_CUDA_ABORT_POLL_US", "0"}}, 1 << 20},
          {"fix", {}, 262144},
          {"old_abort_poll", {{"ACTORCC_CUDA_ABORT_POLL_US", "0"}}, 262144},
          {"old_abort_poll_nopdl", {{"ACTORCC_CUDA_ABORT_POLL_US", "0"}, {"ACTORCC_CUDA_PDL", "0"}}, 1 << 20},
          {"fix", {}, 4 << 20},
          {"fix", {}, 65536},
      };
      stall_micro();
      for (size_t k = 0; k < vs.size() && k < ids.size(); ++k) {
        auto c = make_comm_with(ids[k], "", vs[k].env);
        stall_test(*c, vs[k].label, vs[k].bytes, {0, 300, 1000, 3000, 0});
      }
    }
    if (mut_check) {
      // The short matrix the mutation phase runs (scripts/device.sh mutations): sizes on the
      // tile-reduce routes, the half types whose sums round, avg and prod; every mutation of
      // common/mutation.hpp must fail some of these cases, the unmutated build none.
      // The routes are forced: the planner sends these sizes to the LL128 routes, which carry
      // no mutation.
      const char* algos[2] = {"twoshot", "twoshot_pipe"};
      for (int k = 0; k < 2; ++k) {
        auto c = make_comm(ids[k], algos[k]);
        for (DataType t : {DataType::Float16, DataType::BFloat16, DataType::Float32})
          for (RedOp op : {RedOp::Sum, RedOp::Avg, RedOp::Prod})
            for (size_t n : {size_t(262147), size_t(1048576 + 5)}) test_allreduce(*c, algos[k], t, op, n, false, 0, seed++);
      }
      auto c = make_comm_with(ids[2], "", {{"ACTORCC_CUDA_LL128_RSAG_MAX", "1"}});  // the push reduce_scatter
      for (DataType t : {DataType::Float16, DataType::Float32})
        for (size_t n : {size_t(100003), size_t(1000003)}) test_reduce_scatter(*c, t, RedOp::Sum, n, false, seed++);
    }
    if (g_shared_gpu) refused_without_share_setting(ids[25]);
    if (reg_only && g_world > 1) registered_groups(ids, true, seed);
    if (!bench_only && !stall && !reg_only && !mut_check) {
      // 1. the planner's choice, every dtype x op, sizes across every algorithm's range
      {
        auto c = make_comm(ids[0], "");
        if (g_rank == 0) {
          std::printf("rank 0: backend %s, device %d, world %d\n", std::string(to_string(c->backend())).c_str(), c->device(), g_world);
          for (size_t b : {size_t(4096), size_t(65536), size_t(262144), size_t(1 << 20), size_t(16 << 20)})
            std::printf("plan(all_reduce, %zu) = %s\n", b, c->plan(Collective::AllReduce, b).c_str());
        }
        std::vector<size_t> sizes = {1, 2, 3, 7, 17, 64, 255, 1027, 4096, 16383, 65543, 262147, 1048576 + 5};
        if (!quick) sizes.push_back((16u << 20) + 3);
        for (DataType t : types)
          for (RedOp op : ops)
            for (size_t n : sizes) {
              if (n * dtype_size(t) > (64u << 20)) continue;
              bool big = n > 300000;  // every op at 1 Mi elements; above, the cheaper dtypes only
              if (n > (8u << 20) && t != DataType::Float32 && t != DataType::BFloat16 && t != DataType::Int8 &&
                  t != DataType::Int64)
                continue;
              test_allreduce(*c, "auto", t, op, n, false, 0, seed++);
              if (!big || t == DataType::Float32) test_allreduce(*c, "auto", t, op, n, true, 0, seed++);
              if (n % 5 == 2 && !big) test_allreduce(*c, "auto", t, op, n, false, 1, seed++);
            }
        if (g_rank == 0) std::printf("all_reduce[auto]: %ld cases, %ld failures\n", g_cases, g_fail);
        // reduce_scatter, all_gather, broadcast, barrier
        for (DataType t : types)
          for (size_t n : {size_t(1), size_t(5), size_t(1024), size_t(4099), size_t(100003), size_t(2000000)}) {
            if (n * dtype_size(t) * g_world > (64u << 20)) continue;
            for (RedOp op : ops) {
              if (n > 200000 && op != RedOp::Sum && op != RedOp::Min) continue;  // every op up to 100003
              test_reduce_scatter(*c, t, op, n, false, seed++);
            }
            test_reduce_scatter(*c, t, RedOp::Sum, n, true, seed++);
            test_all_gather(*c, t, n, false, 0, seed++);
            test_all_gather(*c, t, n, true, 0, seed++);
            if (n % 2) test_all_gather(*c, t, n, false, 1, seed++);
            for (int root = 0; root < g_world; ++root) test_broadcast(*c, t, n, root, root == 1, seed++);
          }
        for (int i = 0; i < 10; ++i) c->barrier(g_stream);
        sync_or_fail("barrier");
        if (g_rank == 0) std::printf("after rs/ag/bcast/barrier: %ld cases, %ld failures\n", g_cases, g_fail);
        test_graph(*c, rounds(false, 1000));
        test_back_to_back(*c, rounds(false, 1000));
        if (g_rank == 0) std::printf("after graph + back-to-back: %ld cases, %ld failures\n", g_cases, g_fail);
      }
      // 2. each all-reduce algorithm forced over sizes beyond its planner range
      if (g_world > 1) {
        const char* algos[6] = {"oneshot", "oneshot_push", "twoshot", "twoshot_pipe", "oneshot_ll128", "twoshot_ll128"};
        const size_t algo_ids[6] = {1, 2, 3, 4, 19, 26};
        for (int k = 0; k < 6; ++k) {
          // the two-shot's group also takes reduce_scatter and all_gather off LL128 lines: the
          // push reduce_scatter runs the two-shot kernel's first phase
          auto c = k == 2 ? make_comm_with(ids[algo_ids[k]], algos[k], {{"ACTORCC_CUDA_LL128_RSAG_MAX", "1"}})
                          : make_comm(ids[algo_ids[k]], algos[k]);
          std::string name = algos[k];
          forced_sweep(*c, name, k > 0 && !quick, seed);
          if (k == 2) {
            if (g_rank == 0) std::printf("plan(reduce_scatter / all_gather, 1 MiB) = %s / %s\n",
                                         c->plan(Collective::ReduceScatter, 1 << 20).c_str(),
                                         c->plan(Collective::AllGather, 1 << 20).c_str());
            for (DataType t : types)
              for (size_t n : {size_t(5), size_t(4099), size_t(2000000)})
                if (n * dtype_size(t) * g_world <= (64u << 20)) {
                  test_reduce_scatter(*c, t, RedOp::Sum, n, false, seed++);
                  test_reduce_scatter(*c, t, RedOp::Max, n, true, seed++);
                  test_all_gather(*c, t, n, n == 4099, 0, seed++);
                }
          }
          test_graph(*c, rounds(quick));
          if (g_rank == 0) std::printf("all_reduce[%s]: total %ld cases, %ld failures\n", name.c_str(), g_cases, g_fail);
        }
        // 3. the pipelined two-shot with small tiles (many tiles per CTA: the RS/AG overlap and
        //    the slot reuse across tiles), mixed by the planner with LL / push in one group.
        {
          auto c = make_comm_with(ids[5], "",
                                  {{"ACTORCC_CUDA_PIPE_TILE", "8192"},
                                   {"ACTORCC_CUDA_MIN_TILE", "4096"},
                                   {"ACTORCC_CUDA_PIPE_MIN", "1048577"},
                                   {"ACTORCC_CUDA_LL128_MAX", "1048576"},
                                   {"ACTORCC_CUDA_PUSH_MAX", "1048576"},
                                   {"ACTORCC_CUDA_LL128_TWOSHOT_MAX", "1"}});  // > 1 MiB: always the pipe
          if (g_rank == 0) std::printf("plan(all_reduce, 16 MiB) with PIPE_MIN = %s\n", c->plan(Collective::AllReduce, 16 << 20).c_str());
          std::vector<size_t> sizes = {300001, (1u << 20) + 5};
          if (!quick) sizes.push_back((8u << 20) + 1);
          allreduce_sweep(
              *c, "pipe_t8k", sizes, seed,
              [](DataType t, RedOp op, size_t n) {  // smaller sizes are not the pipe: covered above
                return n * dtype_size(t) > (1u << 20) * 2 / g_world && large_only_sum_avg(t, op, n);
              },
              [](size_t n) { return n == 300001; });
          test_graph(*c, rounds(quick));
          test_back_to_back(*c, rounds(quick));
          test_bad_buffers(*c);  // last: it aborts the group
          if (g_rank == 0) std::printf("all_reduce[pipe_t8k mixed]: total %ld cases, %ld failures\n", g_cases, g_fail);
        }
        // 4. LL128 with 2 KiB slots (4 groups: many rounds per CTA, both parities reused),
        //    mixed by the planner with LL on 4 CTAs (many rounds too), the push and the pipe
        //    (16 KiB tiles) in one group.
        {
          auto c = make_comm_with(ids[20], "",
                                  {{"ACTORCC_WORKSPACE_BYTES", "17301504"},  // 132 CTAs x 2 ranks x 4 x 16 KiB
                                   {"ACTORCC_CUDA_LL_BLOCKS", "4"},
                                   {"ACTORCC_CUDA_LL128_BYTES", "1622016"},  // 2 x 396 CTAs x 2 KiB (2 ranks)
                                   {"ACTORCC_CUDA_LL128_MAX", "4194304"},
                                   {"ACTORCC_CUDA_LL_MAX", "65536"}});
          if (g_rank == 0)
            std::printf("plan(all_reduce, 1 MiB) with small LL128 slots = %s\n", c->plan(Collective::AllReduce, 1 << 20).c_str());
          mixed_sweep(*c, "ll128_small", quick, seed);
        }
        // 5. the LL128 two-shot forced with 1 KiB slots (1 group per phase and round: many
        //    rounds per CTA, both parities and both slot halves reused), in place and misaligned,
        //    reduce_scatter and all_gather alone, a graph and back-to-back rounds. With more than 2 ranks the planner-mixed group
        //    above takes it from 256 KiB with the same slots.
        {
          auto c = make_comm_with(ids[27], "twoshot_ll128", {{"ACTORCC_CUDA_LL128_BYTES", "1"}});
          forced_sweep(*c, "ll128_twoshot_small", false, seed);
          // and its reduce-scatter and all-gather alone (the planner's for both collectives)
          for (DataType t : types)
            for (size_t n : {size_t(3), size_t(1000), size_t(65537), size_t(300001)}) {
              test_reduce_scatter(*c, t, n < 2000 ? RedOp::Avg : RedOp::Sum, n, n == 1000, seed++);
              test_all_gather(*c, t, n, n == 65537, 0, seed++);
            }
          test_graph(*c, rounds(quick));
          test_back_to_back(*c, rounds(quick));
          if (g_rank == 0) std::printf("all_reduce[ll128_twoshot_small]: total %ld cases, %ld failures\n", g_cases, g_fail);
        }
        registered_groups(ids, quick, seed);
      }
    }
    if ((do_bench || bench_only) && !stall && g_world > 1) {
      const size_t G = size_t(1) << 30;
      std::vector<size_t> sizes = {4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256u << 20, G};
      const std::vector<size_t> big = {1 << 20, 2 << 20, 4 << 20, 16 << 20, 64 << 20, 256u << 20, G};
      const bool tune_only = std::getenv("ACTORCC_TEST_TUNE_ONLY") != nullptr;  // skip the other collectives
      if (g_rank == 0) std::printf("TIME %-14s %-13s %11s %10s %10s %8s\n", "comm", "algo", "bytes", "eager_us", "graph_us", "busbw");
      {
        auto c = make_comm(ids[6], "");
        bench(*c, "auto", sizes);
        if (!tune_only) bench_other(*c);
      }
      if (!tune_only) {  // reduce_scatter and all_gather by the push kernels, for comparison
        auto c = make_comm_with(ids[28], "", {{"ACTORCC_CUDA_LL128_RSAG_MAX", "1"}});
        bench_other(*c);
      }
      if (!tune_only) {
        auto c = make_comm(ids[7], "oneshot");
        bench(*c, "oneshot", {1024, 4096, 16384, 65536, 262144, 524288, 1 << 20, 2 << 20});
      }
      if (!tune_only) {
        auto c = make_comm(ids[8], "oneshot_push");
        bench(*c, "oneshot_push", {65536, 262144, 524288, 1 << 20, 2 << 20, 4 << 20, 16 << 20, 64 << 20});
      }
      if (!tune_only) {
        auto c = make_comm(ids[9], "twoshot");
        bench(*c, "twoshot", big);
      }
      // variants (the settings are agreed from rank 0, and every rank sets the same)
      struct V { const char* name; const char* algo; EnvList env; std::vector<size_t> sizes; };
      const std::vector<V> vs = {
          {"pipe", "twoshot_pipe", {}, big},  // default: 128 KiB tiles
          {"ll128", "oneshot_ll128", {},
           {65536, 262144, 524288, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20, 256u << 20}},
          {"ll128_1x512", "oneshot_ll128", {{"ACTORCC_CUDA_LL128_BLOCKS", "132"}, {"ACTORCC_CUDA_LL128_THREADS", "512"}},
           {1 << 20, 4 << 20, 16 << 20, 64 << 20}},
          // the CTA count before docs/perf/tuning.md T30-T31 (at least 4 groups per CTA only)
          {"ll128_busy0", "oneshot_ll128", {{"ACTORCC_CUDA_LL128_BUSY_GROUPS", "0"}},
           {1 << 20, 2 << 20, 3 << 20, 4 << 20, 8 << 20, 16 << 20}},
          // the LL128 two-shot (planned for more than 2 ranks), and with the CTA rule off
          {"ll128_2s", "twoshot_ll128", {},
           {65536, 262144, 524288, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20, 256u << 20}},
          {"ll128_2s_busy0", "twoshot_ll128", {{"ACTORCC_CUDA_LL128_BUSY_GROUPS", "0"}},
           {262144, 1 << 20, 2 << 20, 4 << 20, 16 << 20, 64 << 20}},
      };
      for (size_t k = 0; k < vs.size(); ++k) {
        size_t id = k < 7 ? 10 + k : 24 + (k - 7);
        if (id >= ids.size()) continue;
        auto c = make_comm_with(ids[id], vs[k].algo, vs[k].env);
        bench(*c, vs[k].name, vs[k].sizes);
      }
      // registered outputs: the pipe's all-gather into the peers' outputs, forced and planned;
      // then with the direct-mode tiles capped at 128 KiB as before docs/perf/tuning.md T24 (id 24)
      for (size_t k = 0; k < 3 && ids.size() > 31; ++k) {
        const bool planned = k == 1;
        auto c = k < 2 ? make_comm(ids[30 + k], planned ? "" : "twoshot_pipe")
                       : make_comm_with(ids[24], "twoshot_pipe", {{"ACTORCC_CUDA_PIPE_TILE", "65536"}});
        register_test_buffers(*c);
        bench(*c, k < 2 ? (planned ? "auto_reg" : "pipe_reg") : "pipe_reg_t128k",
              {4 << 20, 16 << 20, 32 << 20, 64 << 20, 128 << 20, 256u << 20, G}, true);
        c->deregister_buffer(d_b);
        c->deregister_buffer(d_a);
      }
    }
    if (timeout_test && g_world > 1 && ids.size() > 18) {
      // a) abort: rank 1 calls abort() while rank 0's kernel waits for it; the kernel must stop
      //    early (abort word) and the next call must throw RemoteError naming rank 1.
      {
        ++g_cases;
        auto c = make_comm(ids[17], "", std::chrono::seconds(20));
        if (g_rank == 0) {
          auto t0 = std::chrono::steady_clock::now();
          c->all_reduce(d_a, d_b, 1 << 20, DataType::Float32, RedOp::Sum, g_stream);
          sync_or_fail("abort test");
          double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          try {
            c->all_reduce(d_a, d_b, 1024, DataType::Float32, RedOp::Sum, g_stream);
            fail("abort test: no error after the peer aborted");
          } catch (const RemoteError& e) {
            std::printf("abort test: kernel returned after %.2f s; next call threw RemoteError (culprit %d): %s\n", s,
                        e.culprit(), e.what());
            if (e.culprit() != 1) fail("abort test: culprit is not rank 1");
            if (s > 10) fail("abort test: the kernel did not stop early");
          } catch (const std::exception& e) {
            fail(std::string("abort test: wrong exception: ") + e.what());
          }
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          c->abort("test abort from rank 1");
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        }
      }
      // b) timeout: rank 1 never joins the call: rank 0's kernel must give up after the timeout
      //    and the next call must throw TimeoutError naming rank 1.
      ++g_cases;
      auto c = make_comm(ids[18], "", std::chrono::milliseconds(2000));
      if (g_rank == 0) {
        auto t0 = std::chrono::steady_clock::now();
        c->all_reduce(d_a, d_b, 1024, DataType::Float32, RedOp::Sum, g_stream);
        sync_or_fail("timeout test");
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        try {
          c->all_reduce(d_a, d_b, 1024, DataType::Float32, RedOp::Sum, g_stream);
          fail("timeout test: no error after the kernel timed out");
        } catch (const TimeoutError& e) {
          std::printf("timeout test: kernel returned after %.2f s; next call threw TimeoutError: %s\n", s, e.what());
          if (std::string(e.what()).find("rank 1") == std::string::npos) fail("timeout test: error does not name rank 1");
        } catch (const std::exception& e) {
          fail(std::string("timeout test: wrong exception: ") + e.what());
        }
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(3500));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: exception: %s\n", g_rank, e.what());
    exit_code = 3;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf("RESULT rank %d world %d cases %ld failures %ld (%.1f s)\n", g_rank, g_world, g_cases, g_fail, secs);
  std::fflush(stdout);
  std::fflush(stderr);
  if (g_fail) exit_code = 1;
  // Skip global destructors of a possibly broken group (the timeout test) -- resources go with the process.
  std::_Exit(exit_code);
}
