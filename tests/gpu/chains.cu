// CUDA graphs and back-to-back eager rounds (chains.hpp).
#include "chains.hpp"

#include <algorithm>
#include <chrono>

namespace gw {
namespace {

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
    for (size_t i = 0; i < n; ++i) h32[i] = int32_t(h[i] = int64_t(testref::mix(seed ^ testref::mix(g_rank * 1000003ull + i)) % 1000));
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
    const CaseScope cs("all_reduce_chain", i32 ? DataType::Int32 : DataType::Int64, "sum", n * (i32 ? 4 : 8));
    std::vector<int64_t> h(n);
    CK(cudaMemcpy(h.data(), acc, n * 8, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) {
      int64_t s0 = 0;
      for (int k = 0; k < g_world; ++k) s0 += int64_t(testref::mix(seed ^ testref::mix(k * 1000003ull + i)) % 1000);
      int64_t want = reps * s0 + int64_t(g_world) * reps * (reps + 1) / 2;
      if (h[i] != want) {
        std::ostringstream os;
        os << what << " n=" << n << ": [" << i << "] got " << h[i] << " want " << want;
        fail(os.str());
        return;
      }
    }
    check_hashes(c, what, h.data(), h.data(), n * 8, true);
  }
};

}  // namespace

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
    const CaseScope cs("all_gather_chain", DataType::Int64, "-", std::min(agn, chains[1]->n) * g_world * 8);
    size_t m = std::min(agn, chains[1]->n);
    std::vector<int64_t> h(m * g_world);
    CK(cudaMemcpy(h.data(), ag_acc, h.size() * 8, cudaMemcpyDeviceToHost));
    for (int k = 0; k < g_world; ++k)
      for (size_t i = 0; i < m; ++i) {
        int64_t init = int64_t(testref::mix(chains[1]->seed ^ testref::mix(k * 1000003ull + i)) % 1000);
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
void test_back_to_back(Communicator& c, long calls, bool register_some) {
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

void test_stream_per_call(Communicator& c, long calls) {
  static constexpr size_t kSizes[] = {3, 4099, 65536 + 3, 262144 + 1};
  struct Call {
    size_t n;
    int64_t *in, *out;
  };
  std::vector<Call> cs;
  auto value = [](long r, int k, size_t i) { return int64_t(testref::mix(0x57ea11ull ^ testref::mix(r * 7919ull + k * 1000003ull + i)) % 1000); };
  for (long r = 0; r < calls; ++r) {
    Call x{kSizes[r % 4], nullptr, nullptr};
    CK(cudaMalloc(&x.in, x.n * 8));
    CK(cudaMalloc(&x.out, x.n * 8));
    std::vector<int64_t> h(x.n);
    for (size_t i = 0; i < x.n; ++i) h[i] = value(r, g_rank, i);
    CK(cudaMemcpy(x.in, h.data(), x.n * 8, cudaMemcpyHostToDevice));
    CK(cudaMemset(x.out, 0xff, x.n * 8));  // poisoned
    cs.push_back(x);
  }
  CK(cudaDeviceSynchronize());
  for (long r = 0; r < calls; ++r) {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    c.all_reduce(cs[r].in, cs[r].out, cs[r].n, DataType::Int64, RedOp::Sum, s);
    CK(cudaStreamDestroy(s));  // the call's kernel may still run: CUDA finishes it
  }
  sync_or_fail("a stream per call", /*whole_device=*/true);  // the streams are gone: the device's work
  for (long r = 0; r < calls; ++r) {
    const CaseScope scope("all_reduce_stream_per_call", DataType::Int64, "sum", cs[r].n * 8);
    std::vector<int64_t> h(cs[r].n);
    CK(cudaMemcpy(h.data(), cs[r].out, cs[r].n * 8, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < cs[r].n; ++i) {
      int64_t want = 0;
      for (int k = 0; k < g_world; ++k) want += value(r, k, i);
      if (h[i] != want) {
        fail("stream per call " + std::to_string(r) + " n=" + std::to_string(cs[r].n) + ": [" + std::to_string(i) +
             "] got " + std::to_string(h[i]) + " want " + std::to_string(want));
        break;
      }
    }
    cudaFree(cs[r].in);
    cudaFree(cs[r].out);
  }
  if (g_rank == 0) std::printf("stream per call: %ld calls\n", calls);
}

}  // namespace gw
