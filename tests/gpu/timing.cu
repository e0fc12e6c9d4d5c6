// The timing table (timing.hpp): all-reduce of every route and variant, and the other
// collectives, eager and as CUDA graphs, us per call (mean of back-to-back calls).
#include "timing.hpp"

#include <algorithm>

namespace gw {
namespace {

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

}  // namespace

void timing_table() {
  const size_t G = size_t(1) << 30;
  std::vector<size_t> sizes = {4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256u << 20, G};
  const std::vector<size_t> big = {1 << 20, 2 << 20, 4 << 20, 16 << 20, 64 << 20, 256u << 20, G};
  const bool tune_only = std::getenv("ACTORCC_TEST_TUNE_ONLY") != nullptr;  // skip the other collectives
  if (g_rank == 0) std::printf("TIME %-14s %-13s %11s %10s %10s %8s\n", "comm", "algo", "bytes", "eager_us", "graph_us", "busbw");
  {
    auto c = make_comm("time-auto", "");
    bench(*c, "auto", sizes);
    if (!tune_only) bench_other(*c);
  }
  if (!tune_only) {  // reduce_scatter and all_gather by the push kernels, for comparison
    auto c = make_comm("time-push-rsag", "", {{"ACTORCC_CUDA_LL128_RSAG_MAX", "1"}});
    bench_other(*c);
  }
  if (!tune_only) {
    auto c = make_comm("time-oneshot", "oneshot");
    bench(*c, "oneshot", {1024, 4096, 16384, 65536, 262144, 524288, 1 << 20, 2 << 20});
  }
  if (!tune_only) {
    auto c = make_comm("time-oneshot_push", "oneshot_push");
    bench(*c, "oneshot_push", {65536, 262144, 524288, 1 << 20, 2 << 20, 4 << 20, 16 << 20, 64 << 20});
  }
  if (!tune_only) {
    auto c = make_comm("time-twoshot", "twoshot");
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
  for (const V& v : vs) {
    auto c = make_comm(std::string("time-") + v.name, v.algo, v.env);
    bench(*c, v.name, v.sizes);
  }
  // registered outputs: the pipe's all-gather into the peers' outputs, forced and planned;
  // then with the direct-mode tiles capped at 128 KiB as before docs/perf/tuning.md T24
  struct R { const char* name; const char* algo; EnvList env; };
  const R regs[] = {{"pipe_reg", "twoshot_pipe", {}},
                    {"auto_reg", "", {}},
                    {"pipe_reg_t128k", "twoshot_pipe", {{"ACTORCC_CUDA_PIPE_TILE", "65536"}}}};
  for (const R& r : regs) {
    auto c = make_comm(std::string("time-") + r.name, r.algo, r.env);
    register_test_buffers(*c);
    bench(*c, r.name, {4 << 20, 16 << 20, 32 << 20, 64 << 20, 128 << 20, 256u << 20, G}, true);
    c->deregister_buffer(d_b);
    c->deregister_buffer(d_a);
  }
}

}  // namespace gw
