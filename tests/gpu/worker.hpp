// What every part of gpu_worker shares: the rank's state (device buffers, stream, counts), the
// CUDA check, failure reporting, communicators created by name, scoped settings and a captured
// CUDA graph. gpu_worker.cu holds main and the modes; cases.cu one checked call per collective;
// chains.cu graphs and back-to-back rounds; matrix.cu the sweeps; failures.cu the refusal,
// abort and timeout tests; stall.cu and timing.cu the experiments and the timing table.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actorcc/actorcc.hpp"
#include "common/reference.hpp"
#include "common/tally.hpp"

#define CK(x)                                                                                       \
  do {                                                                                              \
    cudaError_t e_ = (x);                                                                           \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
      std::exit(10);                                                                                \
    }                                                                                               \
  } while (0)

namespace gw {

using namespace actorcc;

// The rank's state, set up by main.
extern int g_rank, g_world;
extern long g_cases, g_fail;
extern cudaStream_t g_stream;
extern char* d_a;  // input buffer (g_buf_bytes + 4096)
extern char* d_b;  // output buffer
extern size_t g_buf_bytes;
extern bool g_shared_gpu;  // --shared-gpu: more ranks than GPUs (ACTORCC_CUDA_SHARE_GPU)
extern long g_sample;      // ACTORCC_TEST_SAMPLE
extern testref::Tally g_tally;
constexpr size_t kGuard = 256;  // poisoned bytes after every output (and the misalignment before it)

// Graph replays and back-to-back rounds: `full`, 100 with --quick, 20 with --shared-gpu (there
// every exchange with a rank on the same GPU waits for the GPU to switch processes).
long rounds(bool quick, long full = 300);
// ACTORCC_TEST_SAMPLE=K (K > 1): the matrix functions run every K-th case only, starting at
// (world - 1) % K, so the shared-GPU runs of several world sizes fit a device call and together
// cover the cases that one run would skip. Every rank skips the same cases.
bool sampled_out();

void fail(const std::string& what);
// Waits for g_stream's work (whole_device: the device's, for calls made on other streams) and
// exits 11 naming `what` on a CUDA error.
void sync_or_fail(const std::string& what, bool whole_device = false);

// One case of the matrix: counts it (g_cases and the tally by collective, dtype, op, world,
// size band) as failed when fail() was called during its lifetime.
class CaseScope {
 public:
  CaseScope(const char* coll, DataType t, const std::string& op, size_t bytes)
      : coll_(coll), t_(t), op_(op), bytes_(bytes), fails_before_(g_fail) {
    ++g_cases;
  }
  ~CaseScope() { g_tally.add(coll_, t_, op_, g_world, bytes_, g_fail != fails_before_); }
  CaseScope(const CaseScope&) = delete;
  CaseScope& operator=(const CaseScope&) = delete;

 private:
  const char* coll_;
  DataType t_;
  std::string op_;
  size_t bytes_;
  long fails_before_;
};

// Bitwise agreement: every rank publishes the hash of its output and of the output the
// reference predicts for it; every rank then checks every rank's pair, so a wrong result on
// any rank fails the case on all of them. `same_output`: the outputs must also be equal across
// ranks (all_reduce, all_gather, broadcast; reduce_scatter's shards differ).
void check_hashes(Communicator& c, const std::string& what, const void* got, const void* want, size_t bytes,
                  bool same_output);

// Settings in force for a scope: each variable gets back its earlier value (or is removed
// again) at the end, also when a communicator's creation throws.
using EnvList = std::vector<std::pair<const char*, const char*>>;
class ScopedEnv {
 public:
  explicit ScopedEnv(const EnvList& env);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> before_;
};

// Communicators by name: gpu_launch hands each rank the same list of UniqueIds
// (ACTORCC_TEST_IDS); the first communicator made under a name takes the next unused id. Every
// rank makes the same communicators in the same order, so the names map to the same ids
// everywhere; a name used twice, or more communicators than ids, is an error.
void set_comm_ids(std::vector<std::string> ids);
// A CUDA communicator named `name`, with ACTORCC_ALGO = algo and `env` set while it is created
// (settings are read at creation; rank 0's win).
std::unique_ptr<Communicator> make_comm(const std::string& name, const std::string& algo, const EnvList& env = {},
                                        std::chrono::milliseconds timeout = std::chrono::seconds(20));

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

// Registers the worker's input and output buffers (whole allocations) with c.
void register_test_buffers(Communicator& c);

}  // namespace gw
