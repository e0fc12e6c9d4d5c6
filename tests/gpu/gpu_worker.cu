// gpu_worker: one rank of the GPU test tier (public API only, like a user's actor). Started by
// gpu_launch, which passes ACTORCC_TEST_RANK / _WORLD / _IDS (comma-separated UniqueIds).
//   gpu_worker [--quick] [--no-bench] [--bench-only] [--timeout-test] [--stall-test] [--registered-only]
//              [--shared-gpu] [--mutation-check] [--evidence SECONDS] [--counts DIR]
// --shared-gpu: more ranks than GPUs (gpu_launch --devices 0,0,0): sets ACTORCC_CUDA_SHARE_GPU,
//   runs the quick matrix without timing and with 20 graph replays / back-to-back rounds, so the
//   kernels' 3-8 rank paths run on real GPUs where fewer are lent.
// --mutation-check: only the short matrix that the test-only mutation build must fail.
// --evidence S: only the evidence matrix (every dtype x op x collective), stopping after S seconds.
// --counts DIR: each rank writes its case counts by collective, dtype, op, world and size band
//   to DIR/counts-rank<R>.json (rank 0 prints the same table, lines "COUNT ...").
// The parts: matrix.cu (the sweeps) over cases.cu (one checked call per collective) and
// chains.cu (graphs, back-to-back rounds); failures.cu; stall.cu and timing.cu (experiments).
// Inputs: the shared reference of tests/common/reference.hpp, from a base seed that is fresh
// per run (a hash of the first UniqueId, or ACTORCC_TEST_SEED), printed by rank 0.
// Prints "RESULT rank R world W cases N failures F" and exits non-zero on any failure.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "failures.hpp"
#include "launch_env.hpp"
#include "matrix.hpp"
#include "stall.hpp"
#include "timing.hpp"
#include "worker.hpp"

using namespace gw;

int main(int argc, char** argv) {
  bool quick = false, do_bench = true, bench_only = false, timeout_test = false, stall = false, reg_only = false;
  bool mut_check = false;
  double evidence_s = 0;
  std::string counts_dir;
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
    else if (a == "--evidence" && i + 1 < argc) evidence_s = std::atof(argv[++i]), do_bench = false;
    else if (a == "--counts" && i + 1 < argc) counts_dir = argv[++i];
    else {
      std::fprintf(stderr, "gpu_worker: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines survive a kill by the caller's timeout
  const auto launched = gpu_launch::worker_env("gpu_worker");
  if (!launched) return 2;
  g_rank = launched->rank;
  g_world = launched->world;
  if (const char* k = std::getenv("ACTORCC_TEST_SAMPLE")) g_sample = std::max(1L, std::atol(k));
  if (g_shared_gpu) setenv("ACTORCC_CUDA_SHARE_GPU", "1", 1);
  const auto& ids = launched->ids;
  set_comm_ids(ids);
  // The ids' tokens are random and the same on every rank: a fresh seed per run that every
  // rank agrees on without an exchange.
  uint64_t seed = testref::mix(testref::fnv(ids.at(0).data(), ids[0].size()));
  if (const char* s = std::getenv("ACTORCC_TEST_SEED")) seed = std::strtoull(s, nullptr, 0);
  if (g_rank == 0) std::printf("base seed %llu (ACTORCC_TEST_SEED reproduces it)\n", static_cast<unsigned long long>(seed));
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  g_buf_bytes = size_t(1) << 30;  // the timing table goes up to 1 GiB
  CK(cudaMalloc(&d_a, g_buf_bytes + 4096));
  CK(cudaMalloc(&d_b, g_buf_bytes + 4096));
  CK(cudaMemset(d_a, 0, g_buf_bytes));
  auto t_start = std::chrono::steady_clock::now();
  int exit_code = 0;
  try {
    if (stall && g_world > 1) stall_experiment();
    if (mut_check) mutation_check(seed);
    // On virtual nodes (gpu_launch --nodes) the ranks sharing the GPU may lie on different
    // nodes, which share nothing but the device: the refusal is a rule within a node.
    if (g_shared_gpu && !std::getenv("ACTORCC_NODE_ID")) refused_without_share_setting();
    if (evidence_s > 0) evidence_matrix(evidence_s, seed);
    if (reg_only && g_world > 1) registered_groups(true, seed);
    if (!bench_only && !stall && !reg_only && !mut_check && evidence_s <= 0) tier_matrix(quick, seed);
    if ((do_bench || bench_only) && !stall && g_world > 1) timing_table();
    if (timeout_test && g_world > 1) abort_and_timeout_tests();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: exception: %s\n", g_rank, e.what());
    exit_code = 3;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (g_rank == 0) std::printf("%s", g_tally.table().c_str());
  if (!counts_dir.empty() && !g_tally.write_json(counts_dir + "/counts-rank" + std::to_string(g_rank) + ".json"))
    std::fprintf(stderr, "rank %d: cannot write the counts to %s\n", g_rank, counts_dir.c_str());
  std::printf("RESULT rank %d world %d cases %ld failures %ld (%.1f s)\n", g_rank, g_world, g_cases, g_fail, secs);
  std::fflush(stdout);
  std::fflush(stderr);
  if (g_fail) exit_code = 1;
  // Skip global destructors of a possibly broken group (the timeout test) -- resources go with the process.
  std::_Exit(exit_code);
}
