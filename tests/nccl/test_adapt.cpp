// The NCCL front end's adapted reductions (nccl/src/adapt.hpp) on the CPU backend, ranks as
// threads of this process each with its own Communicator over one UniqueId: the whole matrix
// (adapt_matrix.hpp) at worlds 2 and 3, the calls that must pass through to the core, and the
// refusals (wrong-dtype, destroyed and foreign PreMulSum ops) on every rank.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "adapt_state.hpp"
#include "nccl/adapt_matrix.hpp"

namespace actorcc::ncclabi::testing {
namespace {

Options cpu_options() {
  Options o;
  o.backend = Backend::Cpu;
  o.join_timeout = std::chrono::seconds(30);
  o.timeout = std::chrono::seconds(20);
  return o;
}

// Runs fn(comm, state) on `world` threads, one rank each; returns every rank's failures.
template <typename Fn>
std::vector<std::string> run_group(int world, Fn fn) {
  const UniqueId id = UniqueId::create("127.0.0.1");
  std::vector<std::vector<std::string>> fails(world);
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      try {
        Communicator comm(id, r, world, cpu_options());
        AdaptStatePtr st = make_adapt_state(comm);
        fails[r] = fn(comm, *st);
      } catch (const std::exception& e) {
        fails[r].push_back("rank " + std::to_string(r) + " threw: " + e.what());
      }
    });
  for (auto& t : ts) t.join();
  std::vector<std::string> all;
  for (auto& f : fails) all.insert(all.end(), f.begin(), f.end());
  return all;
}

uint64_t fresh_seed() {
  const uint64_t s = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("seed 0x%llx\n", static_cast<unsigned long long>(s));
  return s;
}

void expect_none(const std::vector<std::string>& fails, uint64_t seed) {
  for (size_t i = 0; i < fails.size() && i < 20; ++i) ADD_FAILURE() << fails[i];
  EXPECT_TRUE(fails.empty()) << fails.size() << " failures, seed 0x" << std::hex << seed;
}

TEST(NcclAdapt, MatrixWorld2) {
  const uint64_t seed = fresh_seed();
  expect_none(run_group(2, [&](Communicator& c, AdaptState& st) { return run_matrix(c, st, host_mem(), seed, false); }), seed);
}

TEST(NcclAdapt, MatrixWorld3) {
  const uint64_t seed = fresh_seed();
  expect_none(run_group(3, [&](Communicator& c, AdaptState& st) { return run_matrix(c, st, host_mem(), seed, true); }), seed);
}

TEST(NcclAdapt, MatrixWorld4) {
  const uint64_t seed = fresh_seed();
  expect_none(run_group(4, [&](Communicator& c, AdaptState& st) { return run_matrix(c, st, host_mem(), seed, true); }), seed);
}

// A scratch bound of a few elements: the calls run as many collectives of a few elements each
// (per rank block for reduce-scatter), which must give the same results.
TEST(NcclAdapt, MatrixInParts) {
  const uint64_t seed = fresh_seed();
  expect_none(run_group(3, [&](Communicator& c, AdaptState& st) {
                st.max_scratch = 100;
                return run_matrix(c, st, host_mem(), seed, true);
              }),
              seed);
}

// Every built-in op on every type the core reduces as it is (unsigned sum and prod included,
// as their signed twins) is handed back to the caller, with nothing written.
TEST(NcclAdapt, NativeCallsPassThrough) {
  const auto fails = run_group(1, [](Communicator& c, AdaptState& st) {
    std::vector<std::string> f;
    uint64_t buf[4] = {1, 2, 3, 4}, out[4] = {}, untouched[4] = {};
    for (int t = 0; t < 10; ++t)
      for (int op = 0; op < 5; ++op) {
        // Integer avg is NCCL's wrapping sum then a divide (the core's avg sums exactly).
        const bool integer = t == Int8 || t == Uint8 || t == Int32 || t == Uint32 || t == Int64 || t == Uint64;
        const bool adapted = ((t == Uint32 || t == Uint64) && (op == Max || op == Min)) || (integer && op == Avg);
        for (ReduceKind k : {ReduceKind::AllReduce, ReduceKind::ReduceScatter, ReduceKind::Reduce}) {
          const bool took = run_adapted(c, st, {k, buf, adapted ? out : untouched, 2, t, op, 0, nullptr});
          if (took != adapted) f.push_back(std::string(kTypeName[t]) + " " + kOpName[op] + ": took=" + (took ? "1" : "0"));
        }
      }
    for (uint64_t v : untouched)
      if (v != 0) f.push_back("a call handed back to the caller wrote its output");
    return f;
  });
  for (const auto& f : fails) ADD_FAILURE() << f;
}

// Integer avg as NCCL computes it: the sum wraps in the element type, then it is divided by the
// world size (truncating, signed for the signed types). Values chosen so the sums overflow, where
// an exact average would differ; the expectation is worked out here, element by element.
TEST(NcclAdapt, IntegerAvgWrapsThenDivides) {
  const auto fails = run_group(3, [](Communicator& c, AdaptState& st) {
    std::vector<std::string> f;
    const int r = c.rank(), world = c.world_size();
    auto value = [](int rank, int i) { return static_cast<int64_t>((rank + 1) * 70 + i * 37) * (i % 2 ? -1 : 1); };
    auto check = [&](int t, auto zero) {
      using T = decltype(zero);
      constexpr int n = 9;
      T in[n], out[n];
      for (int i = 0; i < n; ++i) in[i] = static_cast<T>(value(r, i) * (sizeof(T) > 1 ? 30000000 : 1));
      for (int i = 0; i < n; ++i) out[i] = static_cast<T>(0x5a);
      if (!run_adapted(c, st, {ReduceKind::AllReduce, in, out, n, t, Avg, 0, nullptr})) {
        f.push_back(std::string(kTypeName[t]) + " avg was not adapted");
        return;
      }
      for (int i = 0; i < n; ++i) {
        T sum = 0;  // wraps in T, as NCCL's sum does
        for (int q = 0; q < world; ++q)
          sum = static_cast<T>(sum + static_cast<T>(value(q, i) * (sizeof(T) > 1 ? 30000000 : 1)));
        const T want = static_cast<T>(sum / static_cast<T>(world));
        if (out[i] != want)
          f.push_back(std::string(kTypeName[t]) + " avg [" + std::to_string(i) + "]: got " +
                      std::to_string(static_cast<int64_t>(out[i])) + " want " + std::to_string(static_cast<int64_t>(want)));
      }
    };
    check(Int8, int8_t{});
    check(Uint8, uint8_t{});
    check(Int32, int32_t{});
    check(Uint32, uint32_t{});
    check(Int64, int64_t{});
    check(Uint64, uint64_t{});
    return f;
  });
  for (const auto& f : fails) ADD_FAILURE() << f;
}

TEST(NcclAdapt, CreateAndDestroyReturnCodes) {
  const auto fails = run_group(1, [](Communicator& c, AdaptState& st) {
    std::vector<std::string> f;
    float s = 0.5f;
    int op = -1;
    auto want = [&](int got, int rc, const char* what) {
      if (got != rc) f.push_back(std::string(what) + ": got " + std::to_string(got) + ", want " + std::to_string(rc));
    };
    want(create_premul(st, nullptr, &s, Float32, 1), 4, "null op pointer");
    want(create_premul(st, &op, nullptr, Float32, 1), 4, "null scalar");
    want(create_premul(st, &op, &s, 12, 1), 4, "datatype 12");
    want(create_premul(st, &op, &s, -1, 1), 4, "datatype -1");
    want(create_premul(st, &op, &s, Float32, 2), 4, "residence 2");
    for (int b = 0; b < 5; ++b) want(destroy_premul(st, b), 4, "destroying a built-in op");
    want(create_premul(st, &op, &s, Float32, 1), 0, "a valid op");
    if (op < 5) f.push_back("a PreMulSum handle below ncclNumOps: " + std::to_string(op));
    int op2 = -1;
    want(create_premul(st, &op2, &s, Float32, 0), 0, "a second op");
    if (op2 == op) f.push_back("two live ops share a handle");
    want(destroy_premul(st, op), 0, "destroying it");
    want(destroy_premul(st, op), 4, "destroying it twice");
    want(destroy_premul(st, op2), 0, "destroying the second");
    return f;
  });
  for (const auto& f : fails) ADD_FAILURE() << f;
}

// One refusal: `bad` must throw InvalidArgument whose text has `needle` (world 1, so the
// communicator stays usable for the next).
void expect_refused(Communicator& c, AdaptState& st, const ReduceCall& bad, const std::string& needle,
                    std::vector<std::string>& f) {
  try {
    run_adapted(c, st, bad);
    f.push_back("not refused: " + needle);
  } catch (const InvalidArgument& e) {
    if (std::string(e.what()).find(needle) == std::string::npos) f.push_back("refusal without '" + needle + "': " + e.what());
  } catch (const std::exception& e) {
    f.push_back(std::string("refused with another error: ") + e.what());
  }
}

TEST(NcclAdapt, RefusesWrongDestroyedAndForeignOps) {
  const UniqueId id_a = UniqueId::create("127.0.0.1"), id_b = UniqueId::create("127.0.0.1");
  Communicator a(id_a, 0, 1, cpu_options()), b(id_b, 0, 1, cpu_options());
  AdaptStatePtr sa = make_adapt_state(a), sb = make_adapt_state(b);
  std::vector<std::string> f;
  uint16_t half_scalar = 0x3800;  // 0.5
  float buf[8] = {}, out[8] = {};
  int op = -1, foreign = -1;
  ASSERT_EQ(create_premul(*sa, &op, &half_scalar, Float16, 1), 0);
  ASSERT_EQ(create_premul(*sb, &foreign, &half_scalar, Float16, 1), 0);
  expect_refused(a, *sa, {ReduceKind::AllReduce, buf, out, 4, Float32, op, 0, nullptr}, "was made for ncclFloat16 but the call's datatype is ncclFloat32", f);
  expect_refused(a, *sa, {ReduceKind::AllReduce, buf, out, 4, Float16, foreign, 0, nullptr},
                 "ncclRedOp_t " + std::to_string(foreign) + " is not a live PreMulSum op of this communicator", f);
  ASSERT_EQ(destroy_premul(*sa, op), 0);
  expect_refused(a, *sa, {ReduceKind::Reduce, buf, out, 4, Float16, op, 0, nullptr},
                 "ncclRedOp_t " + std::to_string(op) + " is not a live PreMulSum op", f);
  expect_refused(a, *sa, {ReduceKind::AllReduce, buf, out, 4, 12, Sum, 0, nullptr}, "ncclDataType_t 12", f);
  expect_refused(a, *sa, {ReduceKind::AllReduce, buf, out, 4, E4m3, -3, 0, nullptr}, "ncclRedOp_t -3", f);
  expect_refused(a, *sa, {ReduceKind::AllReduce, nullptr, out, 4, E4m3, Sum, 0, nullptr}, "send buffer is null", f);
  expect_refused(a, *sa, {ReduceKind::Reduce, buf, out, 4, E5m2, Sum, 3, nullptr}, "root 3", f);
  for (const auto& s : f) ADD_FAILURE() << s;
}

// In a group, the rank with the bad op is refused naming it, and the other rank's call fails
// too, naming that rank, in bounded time (no hang).
TEST(NcclAdapt, RefusalReachesEveryRank) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> seen(2);
  run_group(2, [&](Communicator& c, AdaptState& st) {
    float in[5] = {1, 2, 3, 4, 5}, out[5] = {};
    float s = 2;
    int op = -1;
    create_premul(st, &op, &s, Float32, 1);
    if (c.rank() == 0) destroy_premul(st, op);
    try {
      run_adapted(c, st, {ReduceKind::AllReduce, in, out, 5, Float32, op, 0, nullptr});
      seen[c.rank()] = "completed";
    } catch (const Error& e) {
      seen[c.rank()] = std::string(e.what()) + " culprit=" + std::to_string(e.culprit());
    }
    return std::vector<std::string>{};
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15));
  EXPECT_NE(seen[0].find("is not a live PreMulSum op"), std::string::npos) << seen[0];
  EXPECT_NE(seen[0].find("rank 0"), std::string::npos) << seen[0];
  EXPECT_NE(seen[1].find("culprit=0"), std::string::npos) << seen[1];
}

}  // namespace
}  // namespace actorcc::ncclabi::testing
