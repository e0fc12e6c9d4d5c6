// The stall experiment (--stall-test, stall.hpp): an all-reduce must not stay slow after one
// rank was late once; and the cost of the host-word reads the abort check makes.
#include "stall.hpp"

#include <algorithm>
#include <functional>
#include <sstream>

namespace gw {
namespace {

// Rank 1 delays its stream by `skew_us` (a spin kernel) right before 5 back-to-back replays of a
// 20-call graph; every replay after the first must run at the normal speed. Then 20 eager
// calls, timed one by one.
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

}  // namespace

void stall_experiment() {
  // Variants: (label, env settings, bytes), each with its own communicator.
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
  for (const SV& v : vs) {
    auto c = make_comm(std::string("stall-") + v.label + "-" + std::to_string(v.bytes), "", v.env);
    stall_test(*c, v.label, v.bytes, {0, 300, 1000, 3000, 0});
  }
}

}  // namespace gw
