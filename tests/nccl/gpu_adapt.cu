// The adapted reductions (nccl/src/adapt.hpp) on the CUDA backend: the CPU tier's matrix
// (adapt_matrix.hpp) on device buffers, then a device-scalar PreMulSum captured in a CUDA graph
// and replayed with changed scalars (float32 in place, and e4m3 through scratch that an eager
// call grew and a later eager call outgrows), then the refusal of a capture that would need more
// scratch. Ranks are processes sharing GPU 0 (ACTORCC_CUDA_SHARE_GPU=1):
//   actorcc_nccl_adapt_gpu [--world N]      starts N ranks of itself and waits (exit 0 = pass)
//   actorcc_nccl_adapt_gpu --cpu 1          the same processes and matrix on the CPU backend
#include <cuda_runtime.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "adapt_state.hpp"
#include "nccl/adapt_matrix.hpp"

extern char** environ;

namespace tt = actorcc::ncclabi::testing;
using namespace actorcc;
using namespace actorcc::ncclabi;

#define CK(x)                                                                                    \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#x) + ": " + cudaGetErrorString(e_)); \
  } while (0)

namespace {

tt::Mem device_mem(cudaStream_t s) {
  tt::Mem m;
  m.alloc = [](size_t n) -> void* {
    void* p = nullptr;
    CK(cudaMalloc(&p, n ? n : 1));
    return p;
  };
  m.release = [](void* p) { CK(cudaFree(p)); };
  m.put = [](void* d, const void* h, size_t n) { CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)); };
  m.get = [](void* h, const void* d, size_t n) { CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost)); };
  m.sync = [s] { CK(cudaStreamSynchronize(s)); };
  m.stream = s;
  return m;
}

// Device-scalar PreMulSum in a CUDA graph: replays see the scalar's current value.
std::vector<std::string> graph_checks(Communicator& c, AdaptState& st, cudaStream_t s) {
  std::vector<std::string> fails;
  const int world = c.world_size(), rank = c.rank();
  const size_t n = 1031;
  std::vector<float> xf(n);
  std::vector<uint8_t> x8(n);
  for (size_t i = 0; i < n; ++i) {
    xf[i] = static_cast<float>(i % 7) + rank + 1;
    x8[i] = tt::fp8_code(tt::E4m3, (static_cast<int>(i % 9) - 4 + rank) * 0.5);
  }
  float *sf, *rf, *scal_f;
  uint8_t *s8, *r8, *scal_8, *big_in, *big_out;
  CK(cudaMalloc(&sf, n * 4));
  CK(cudaMalloc(&rf, n * 4));
  CK(cudaMalloc(&s8, n));
  CK(cudaMalloc(&r8, n));
  CK(cudaMalloc(&scal_f, 4));
  CK(cudaMalloc(&scal_8, 1));
  CK(cudaMalloc(&big_in, 16 * n));
  CK(cudaMalloc(&big_out, 16 * n));
  CK(cudaMemcpy(sf, xf.data(), n * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(s8, x8.data(), n, cudaMemcpyHostToDevice));
  CK(cudaMemset(big_in, 0, 16 * n));
  int op_f = -1, op_8 = -1;
  if (create_premul(st, &op_f, scal_f, tt::Float32, 0) || create_premul(st, &op_8, scal_8, tt::E4m3, 0))
    return {"create_premul failed"};
  const ReduceCall call_f{ReduceKind::AllReduce, sf, rf, n, tt::Float32, op_f, 0, s};
  const ReduceCall call_8{ReduceKind::AllReduce, s8, r8, n, tt::E4m3, op_8, 0, s};
  const ReduceCall grow{ReduceKind::AllReduce, big_in, big_out, 16 * n, tt::E4m3, tt::Sum, 0, s};
  auto set_scalars = [&](double v) {
    const float f = static_cast<float>(v);
    const uint8_t b = tt::fp8_code(tt::E4m3, v);
    CK(cudaMemcpy(scal_f, &f, 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(scal_8, &b, 1, cudaMemcpyHostToDevice));
  };
  set_scalars(1.0);
  run_adapted(c, st, call_8);  // eager: grows the scratch the capture will use
  CK(cudaStreamSynchronize(s));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  run_adapted(c, st, call_f);
  run_adapted(c, st, call_8);
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  int step = 0;
  for (double v : {0.5, 2.0, 0.25, 1.5}) {
    set_scalars(v);
    CK(cudaMemsetAsync(rf, 0xA5, n * 4, s));
    CK(cudaMemsetAsync(r8, 0xA5, n, s));
    CK(cudaGraphLaunch(exec, s));
    CK(cudaStreamSynchronize(s));
    std::vector<float> of(n);
    std::vector<uint8_t> o8(n);
    CK(cudaMemcpy(of.data(), rf, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(o8.data(), r8, n, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t i = 0; i < n && bad < 3; ++i) {
      double sum_f = 0, sum_8 = 0;
      for (int k = 0; k < world; ++k) {
        sum_f += (static_cast<double>(i % 7) + k + 1) * static_cast<float>(v);
        sum_8 += tt::fp8_value(tt::E4m3, tt::fp8_code(tt::E4m3, (static_cast<int>(i % 9) - 4 + k) * 0.5)) *
                 tt::fp8_value(tt::E4m3, tt::fp8_code(tt::E4m3, v));
      }
      const uint8_t want8 = tt::fp8_code(tt::E4m3, sum_8);
      if (of[i] != static_cast<float>(sum_f) || o8[i] != want8) {
        ++bad;
        fails.push_back("rank " + std::to_string(rank) + ": graph replay with scalar " + std::to_string(v) +
                        " element " + std::to_string(i) + ": float32 " + std::to_string(of[i]) + " want " +
                        std::to_string(sum_f) + ", e4m3 " + std::to_string(o8[i]) + " want " + std::to_string(want8));
      }
    }
    // An eager call that outgrows the scratch the graph uses: the graph's buffer must stay valid.
    if (step++ == 1) {
      run_adapted(c, st, grow);
      CK(cudaStreamSynchronize(s));
    }
  }
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  // A capture that would need more scratch than held is refused, telling the user what to do.
  // The refusal aborts the group, so first every rank must be done with the replays above.
  c.host_barrier();
  CK(cudaFree(big_in));
  CK(cudaFree(big_out));
  CK(cudaMalloc(&big_in, 64 * n));
  CK(cudaMalloc(&big_out, 64 * n));
  const ReduceCall bigger{ReduceKind::AllReduce, big_in, big_out, 64 * n, tt::E4m3, tt::Sum, 0, s};
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  std::string refusal;
  try {
    run_adapted(c, st, bigger);
  } catch (const std::exception& e) {
    refusal = e.what();
  }
  cudaGraph_t g2 = nullptr;
  cudaStreamEndCapture(s, &g2);
  if (g2) cudaGraphDestroy(g2);
  cudaGetLastError();
  if (refusal.find("eagerly") == std::string::npos)
    fails.push_back("rank " + std::to_string(rank) + ": a capture needing more scratch was not refused: '" + refusal + "'");
  destroy_premul(st, op_f);
  destroy_premul(st, op_8);
  for (void* p : {static_cast<void*>(sf), static_cast<void*>(rf), static_cast<void*>(s8), static_cast<void*>(r8),
                  static_cast<void*>(scal_f), static_cast<void*>(scal_8), static_cast<void*>(big_in),
                  static_cast<void*>(big_out)})
    cudaFree(p);
  return fails;
}

int worker(int rank, int world, const std::string& id_text, uint64_t seed, bool cpu) {
  std::vector<std::string> fails;
  try {
    Options o;
    o.backend = cpu ? Backend::Cpu : Backend::Cuda;
    o.device = cpu ? -1 : 0;
    o.timeout = std::chrono::seconds(60);
    Communicator c(UniqueId::parse(id_text), rank, world, o);
    AdaptStatePtr st = make_adapt_state(c);
    cudaStream_t s = nullptr;
    if (!cpu) CK(cudaStreamCreate(&s));
    const tt::Mem mem = cpu ? tt::host_mem() : device_mem(s);
    const auto t0 = std::chrono::steady_clock::now();
    fails = tt::run_matrix(c, *st, mem, seed, false);
    std::printf("rank %d: matrix %zu cases, %zu failures, %.1f s\n", rank, tt::all_cases(false).size(), fails.size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (fails.empty()) {  // again with the calls split into parts of a few elements
      st->max_scratch = 200;
      fails = tt::run_matrix(c, *st, mem, seed + 1, true);
      st->max_scratch = size_t{64} << 20;
      std::printf("rank %d: matrix in parts, %zu failures\n", rank, fails.size());
    }
    if (fails.empty() && !cpu) {
      const auto g = graph_checks(c, *st, s);
      std::printf("rank %d: graph checks %s\n", rank, g.empty() ? "pass" : "FAIL");
      fails.insert(fails.end(), g.begin(), g.end());
    }
    st.reset();
    if (s) cudaStreamDestroy(s);
  } catch (const std::exception& e) {
    fails.push_back("rank " + std::to_string(rank) + " threw: " + e.what());
  }
  for (size_t i = 0; i < fails.size() && i < 20; ++i) std::printf("FAIL %s\n", fails[i].c_str());
  std::fflush(stdout);
  return fails.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int world = 2, rank = -1;
  bool cpu = false;  // --cpu 1: the same processes on the CPU backend (a dry run of this program)
  std::string id;
  uint64_t seed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--world") world = std::atoi(argv[i + 1]);
    else if (a == "--rank") rank = std::atoi(argv[i + 1]);
    else if (a == "--id") id = argv[i + 1];
    else if (a == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 0);
    else if (a == "--cpu") cpu = std::atoi(argv[i + 1]) != 0;
  }
  if (rank >= 0) return worker(rank, world, id, seed, cpu);
  // Launcher: hosts the group's root, starts the ranks as processes of this program.
  id = UniqueId::create("127.0.0.1").to_string();
  seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("gpu_adapt: world %d, seed 0x%llx\n", world, static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  setenv("ACTORCC_CUDA_SHARE_GPU", "1", 0);
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const std::string rs = std::to_string(r), ws = std::to_string(world), ss = std::to_string(seed);
    std::vector<char*> args = {argv[0], const_cast<char*>("--rank"), const_cast<char*>(rs.c_str()),
                               const_cast<char*>("--world"), const_cast<char*>(ws.c_str()),
                               const_cast<char*>("--id"), const_cast<char*>(id.c_str()),
                               const_cast<char*>("--seed"), const_cast<char*>(ss.c_str()),
                               const_cast<char*>("--cpu"), const_cast<char*>(cpu ? "1" : "0"), nullptr};
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, args.data(), environ) != 0) {
      std::perror("posix_spawn");
      return 2;
    }
    pids.push_back(pid);
  }
  int failed = 0, left = world;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (left > 0) {
    for (auto& p : pids) {
      int status = 0;
      if (p > 0 && waitpid(p, &status, WNOHANG) == p) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
        p = -1;
        --left;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::printf("gpu_adapt: timed out, killing the ranks left\n");
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("gpu_adapt: %s (%d of %d ranks failed)\n", failed ? "FAIL" : "PASS", failed, world);
  return failed ? 1 : 0;
}
