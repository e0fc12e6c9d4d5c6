// The tier's sweeps (matrix.hpp): the planner's choice, each route forced, small-slot and
// small-tile variants mixed by the planner, registered outputs, the mutation check's short
// matrix and the evidence matrix.
#include "matrix.hpp"

#include <chrono>
#include <iterator>

#include "cases.hpp"
#include "chains.hpp"
#include "failures.hpp"

namespace gw {
namespace {

constexpr DataType kTypes[] = {DataType::Float32, DataType::Float16, DataType::BFloat16, DataType::Float64,
                               DataType::Int8,    DataType::UInt8,   DataType::Int32,    DataType::Int64};
constexpr RedOp kOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::Avg};
// With --shared-gpu beyond 4 ranks (3-4 processes per GPU, every exchange several process
// switches) one type per element size and three ops, so the quick matrix fits its time (the
// evidence matrix covers every type and op there).
std::vector<DataType> test_types() {
  if (g_shared_gpu && g_world > 4) return {DataType::Int8, DataType::Float16, DataType::Float32, DataType::Int64};
  return {std::begin(kTypes), std::end(kTypes)};
}
std::vector<RedOp> test_ops() {
  if (g_shared_gpu && g_world > 4) return {RedOp::Sum, RedOp::Min, RedOp::Avg};
  return {std::begin(kOps), std::end(kOps)};
}

// Every dtype x op x size through `c` (the cases `keep` admits): out of place, in place for
// float32 and bfloat16, and misaligned where misaligned_at(n). One seed per case.
template <typename Keep, typename Misaligned>
void allreduce_sweep(Communicator& c, const std::string& name, const std::vector<size_t>& sizes, uint64_t& seed,
                     Keep keep, Misaligned misaligned_at) {
  for (DataType t : test_types())
    for (RedOp op : test_ops())
      for (size_t n : sizes) {
        if (!keep(t, op, n)) continue;
        test_allreduce(c, name, t, op, n, false, 0, seed++);
        if (t == DataType::Float32 || t == DataType::BFloat16) test_allreduce(c, name, t, op, n, true, 0, seed++);
        if (misaligned_at(n)) test_allreduce(c, name, t, op, n, false, mis_of(seed), seed++);
      }
}
// Sizes above 2 Mi elements only for sum and avg (enough coverage, saves time).
bool large_only_sum_avg(DataType, RedOp op, size_t n) {
  return n <= (2u << 20) || op == RedOp::Sum || op == RedOp::Avg;
}

// A forced algorithm over every dtype x op from 1 element to 300001 (and 8 Mi + 1 for sum when
// `big`), in place, misaligned at 17, 65537 and 8 Mi + 1 elements.
void forced_sweep(Communicator& c, const std::string& name, bool big, uint64_t& seed) {
  std::vector<size_t> sizes = {1, 3, 17, 1000, 4097, 65537, 300001};
  if (big) sizes.push_back((8u << 20) + 1);
  allreduce_sweep(
      c, name, sizes, seed, [](DataType, RedOp op, size_t n) { return n <= 300000 || op == RedOp::Sum; },
      [](size_t n) { return n == 17 || n == 65537 || n > (8u << 20); });
}

// The planner-mixed groups' common sweep (sizes from LL to above 1 MiB; 8 Mi+1 elements unless
// quick), then a graph and back-to-back rounds.
void mixed_sweep(Communicator& c, const std::string& name, bool quick, uint64_t& seed) {
  std::vector<size_t> sizes = {5000, 65543, 300001, (1u << 20) + 5};
  if (!quick) sizes.push_back((8u << 20) + 1);
  allreduce_sweep(c, name, sizes, seed, large_only_sum_avg, [](size_t n) { return n == 65543 || n > (8u << 20); });
  test_graph(c, rounds(quick));
  test_back_to_back(c, rounds(quick));
  test_stream_per_call(c, std::min(128L, rounds(quick)));
  if (g_rank == 0) std::printf("all_reduce[%s mixed]: total %ld cases, %ld failures\n", name.c_str(), g_cases, g_fail);
}

// 1. The planner's choice: every dtype x op, sizes across every route's range, in place,
// misaligned (one op per size in turn, up to 64 MiB); reduce_scatter, all_gather, broadcast
// likewise; barriers; a graph x1000 and 1000 back-to-back rounds.
void planner_matrix(bool quick, uint64_t& seed) {
  const auto types = test_types();
  const auto ops = test_ops();
  auto c = make_comm("auto", "");
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
        if ((n % 5 == 2 && !big) || op == ops[n % ops.size()]) test_allreduce(*c, "auto", t, op, n, false, mis_of(seed), seed++);
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
      test_reduce_scatter(*c, t, ops[n % ops.size()], n, false, seed, mis_of(seed)); ++seed;
      test_all_gather(*c, t, n, false, 0, seed++);
      test_all_gather(*c, t, n, true, 0, seed++);
      test_all_gather(*c, t, n, false, mis_of(seed), seed); ++seed;
      for (int root = 0; root < g_world; ++root) test_broadcast(*c, t, n, root, root == 1, seed++);
      test_broadcast(*c, t, n, int(n % g_world), false, seed, mis_of(seed)); ++seed;
    }
  for (int i = 0; i < 10; ++i) c->barrier(g_stream);
  sync_or_fail("barrier");
  if (g_rank == 0) std::printf("after rs/ag/bcast/barrier: %ld cases, %ld failures\n", g_cases, g_fail);
  test_graph(*c, rounds(false, 1000));
  test_back_to_back(*c, rounds(false, 1000));
  test_stream_per_call(*c, std::min(128L, rounds(false, 1000)));
  if (g_rank == 0) std::printf("after graph + back-to-back + stream per call: %ld cases, %ld failures\n", g_cases, g_fail);
}

// 2. Each all-reduce route forced over sizes beyond its planner range.
void forced_routes(bool quick, uint64_t& seed) {
  const char* algos[] = {"oneshot", "oneshot_push", "twoshot", "twoshot_pipe", "oneshot_ll128", "twoshot_ll128"};
  for (const char* algo : algos) {
    const std::string name = algo;
    const bool twoshot = name == "twoshot";
    // the two-shot's group also takes reduce_scatter and all_gather off LL128 lines: the push
    // reduce_scatter runs the two-shot kernel's first phase
    auto c = twoshot ? make_comm(name, algo, {{"ACTORCC_CUDA_LL128_RSAG_MAX", "1"}}) : make_comm(name, algo);
    forced_sweep(*c, name, name != "oneshot" && !quick, seed);
    if (twoshot) {
      if (g_rank == 0)
        std::printf("plan(reduce_scatter / all_gather, 1 MiB) = %s / %s\n", c->plan(Collective::ReduceScatter, 1 << 20).c_str(),
                    c->plan(Collective::AllGather, 1 << 20).c_str());
      for (DataType t : test_types())
        for (size_t n : {size_t(5), size_t(4099), size_t(2000000)})
          if (n * dtype_size(t) * g_world <= (64u << 20)) {
            test_reduce_scatter(*c, t, RedOp::Sum, n, false, seed++);
            test_reduce_scatter(*c, t, RedOp::Max, n, true, seed++);
            test_reduce_scatter(*c, t, RedOp::Avg, n, false, seed, mis_of(seed)); ++seed;
            test_all_gather(*c, t, n, n == 4099, 0, seed++);
            test_all_gather(*c, t, n, false, mis_of(seed), seed); ++seed;
          }
    }
    test_graph(*c, rounds(quick));
    if (g_rank == 0) std::printf("all_reduce[%s]: total %ld cases, %ld failures\n", algo, g_cases, g_fail);
  }
}

// 3. The pipelined two-shot with small tiles (many tiles per CTA: the RS/AG overlap and the slot
// reuse across tiles), mixed by the planner with LL / push in one group.
void pipe_small_tiles(bool quick, uint64_t& seed) {
  auto c = make_comm("pipe_t8k", "",
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
      [](size_t n) { return n == 300001 || n > (8u << 20); });
  test_graph(*c, rounds(quick));
  test_back_to_back(*c, rounds(quick));
  test_bad_buffers(*c);  // last: it aborts the group
  if (g_rank == 0) std::printf("all_reduce[pipe_t8k mixed]: total %ld cases, %ld failures\n", g_cases, g_fail);
}

// 4. LL128 with 2 KiB slots (4 groups: many rounds per CTA, both parities reused), mixed by the
// planner with LL on 4 CTAs (many rounds too), the push and the pipe (16 KiB tiles) in one group.
void ll128_small_slots(bool quick, uint64_t& seed) {
  auto c = make_comm("ll128_small", "",
                     {{"ACTORCC_WORKSPACE_BYTES", "17301504"},  // 132 CTAs x 2 ranks x 4 x 16 KiB
                      {"ACTORCC_CUDA_LL_BLOCKS", "4"},
                      {"ACTORCC_CUDA_LL128_BYTES", "1622016"},  // 2 x 396 CTAs x 2 KiB (2 ranks)
                      {"ACTORCC_CUDA_LL128_MAX", "4194304"},
                      {"ACTORCC_CUDA_LL_MAX", "65536"}});
  if (g_rank == 0) std::printf("plan(all_reduce, 1 MiB) with small LL128 slots = %s\n", c->plan(Collective::AllReduce, 1 << 20).c_str());
  mixed_sweep(*c, "ll128_small", quick, seed);
}

// 5. The LL128 two-shot forced with 1 KiB slots (1 group per phase and round: many rounds per
// CTA, both parities and both slot halves reused), in place and misaligned, reduce_scatter and
// all_gather alone, a graph and back-to-back rounds. With more than 2 ranks the planner-mixed
// group above takes it from 256 KiB with the same slots.
void ll128_twoshot_small_slots(bool quick, uint64_t& seed) {
  auto c = make_comm("ll128_twoshot_small", "twoshot_ll128", {{"ACTORCC_CUDA_LL128_BYTES", "1"}});
  forced_sweep(*c, "ll128_twoshot_small", false, seed);
  // and its reduce-scatter and all-gather alone (the planner's for both collectives)
  for (DataType t : test_types())
    for (size_t n : {size_t(3), size_t(1000), size_t(65537), size_t(300001)}) {
      test_reduce_scatter(*c, t, n < 2000 ? RedOp::Avg : RedOp::Sum, n, n == 1000, seed, n == 65537 ? mis_of(seed) : 0); ++seed;
      test_all_gather(*c, t, n, n == 65537, n == 300001 ? mis_of(seed) : 0, seed); ++seed;
    }
  test_graph(*c, rounds(quick));
  test_back_to_back(*c, rounds(quick));
  if (g_rank == 0) std::printf("all_reduce[ll128_twoshot_small]: total %ld cases, %ld failures\n", g_cases, g_fail);
}

// Rank 0 decides whether the evidence matrix goes on, so every rank runs the same cases.
bool time_left(Communicator& c, std::chrono::steady_clock::time_point start, double cap_s) {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return c.allgather_bytes(s < cap_s ? "1" : "0").at(0) == "1";
}

}  // namespace

void tier_matrix(bool quick, uint64_t& seed) {
  planner_matrix(quick, seed);
  if (g_world == 1) return;
  forced_routes(quick, seed);
  pipe_small_tiles(quick, seed);
  ll128_small_slots(quick, seed);
  ll128_twoshot_small_slots(quick, seed);
  registered_groups(quick, seed);
}

void registered_groups(bool quick, uint64_t& seed) {
  {
    auto c = make_comm("pipe_registered", "twoshot_pipe", {{"ACTORCC_CUDA_PIPE_TILE", "16384"}, {"ACTORCC_CUDA_MIN_TILE", "4096"}});
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
    auto c = make_comm("auto_registered", "", {{"ACTORCC_CUDA_REG_PIPE_MIN", "1048576"}});
    register_test_buffers(*c);
    // plan() tells the registered route apart (2 ranks: the pipe from REG_PIPE_MIN).
    const CaseScope cs("plan_registered", DataType::Float32, "-", 2 << 20);
    const std::string reg = c->plan(Collective::AllReduce, 2 << 20, true), plain = c->plan(Collective::AllReduce, 2 << 20);
    if (g_world == 2 && (reg != "twoshot_pipe" || plain == "twoshot_pipe"))
      fail("plan(all_reduce, 2 MiB): registered '" + reg + "', not registered '" + plain + "'");
    mixed_sweep(*c, "auto_registered", quick, seed);
    test_back_to_back(*c, rounds(quick), true);
  }
  test_registration_mismatch();
}

void mutation_check(uint64_t& seed) {
  for (const char* algo : {"twoshot", "twoshot_pipe"}) {
    auto c = make_comm(algo, algo);
    for (DataType t : {DataType::Float16, DataType::BFloat16, DataType::Float32})
      for (RedOp op : {RedOp::Sum, RedOp::Avg, RedOp::Prod})
        for (size_t n : {size_t(262147), size_t(1048576 + 5)}) test_allreduce(*c, algo, t, op, n, false, 0, seed++);
  }
  auto c = make_comm("push_reduce_scatter", "", {{"ACTORCC_CUDA_LL128_RSAG_MAX", "1"}});
  for (DataType t : {DataType::Float16, DataType::Float32})
    for (size_t n : {size_t(100003), size_t(1000003)}) test_reduce_scatter(*c, t, RedOp::Sum, n, false, seed++);
}

namespace {
// The evidence matrix's passes over `c`, until `cap_s` after `start`. Across nodes an integer
// avg is refused on every rank (the hierarchical path sums, then divides once, in floating
// point only), so those cases check the refusal and that the group serves the next call.
void evidence_cases(Communicator& c, std::chrono::steady_clock::time_point start, double cap_s, uint64_t& seed) {
  const bool across = spans_nodes(c);
  // Per pass the elements of an all_reduce / broadcast call; reduce_scatter and all_gather take
  // a per-rank share of about the same total.
  const size_t passes[] = {311, 65543, (1u << 20) + 5};
  // Per collective, its j-th case of pass p is misaligned when j + p is odd and in place when
  // (j + p) % 3 == 1: every collective gets both, and a combination changes from pass to pass.
  long j_ar = 0, j_rs = 0, j_ag = 0, j_bc = 0;
  for (int p = 0; p < 3; ++p) {
    const size_t n = passes[p], share = n / g_world + 1;
    auto mis = [&](long j) { return (j + p) % 2 ? mis_of(seed) : 0; };
    auto inplace = [&](long j) { return (j + p) % 3 == 1; };
    for (DataType t : kTypes) {
      for (RedOp op : kOps) {
        if (!time_left(c, start, cap_s)) return;
        if (across && op == RedOp::Avg && !testref::is_float(t)) {
          test_refused(c, Collective::AllReduce, t, op, n);
          test_refused(c, Collective::ReduceScatter, t, op, share);
          continue;
        }
        test_allreduce(c, "evidence", t, op, n, inplace(j_ar), mis(j_ar), seed);
        ++seed, ++j_ar;
        test_reduce_scatter(c, t, op, share, inplace(j_rs), seed, mis(j_rs));
        ++seed, ++j_rs;
      }
      if (!time_left(c, start, cap_s)) return;
      test_all_gather(c, t, share, inplace(j_ag), mis(j_ag), seed);
      ++seed, ++j_ag;
      test_broadcast(c, t, n, int(j_bc % g_world), inplace(j_bc), seed, mis(j_bc));
      ++seed, ++j_bc;
    }
    if (g_rank == 0)
      std::printf("evidence: %zu elements done, %ld cases, %ld failures (%.1f s)\n", n, g_cases, g_fail,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}
}  // namespace

void evidence_matrix(double cap_s, uint64_t& seed) {
  const auto start = std::chrono::steady_clock::now();
  auto c = make_comm("evidence", "");
  evidence_cases(*c, start, cap_s, seed);
  // Across nodes also the captured path: all_reduce chains, an all_gather and a barrier in one
  // CUDA graph replayed (the rails' NCCL calls inside it), then calls back to back.
  if (spans_nodes(*c)) {
    test_graph(*c, rounds(true));
    test_back_to_back(*c, rounds(true));
    if (g_rank == 0) std::printf("evidence across nodes: graph and back-to-back done, %ld cases, %ld failures\n", g_cases, g_fail);
  }
}

}  // namespace gw
