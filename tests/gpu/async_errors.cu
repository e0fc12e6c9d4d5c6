// gpu_async_errors: the GPU failure cases of docs/reliability.md, and the small collective matrix
// that compute-sanitizer runs over (scripts/device.sh phases `errors` and `sanitize`). Started
// by gpu_launch (ACTORCC_TEST_RANK / _WORLD / _IDS); ranks may share one GPU.
//   gpu_async_errors stall|leave|abort|kill|matrix|mismatch
// stall  the last rank stops calling (alive, silent). The others' kernel gives up at the 2 s
//        timeout and the stream goes on (cudaStreamSynchronize returns); the watchdog must set
//        the error within ~1 s, so check(), synchronize() and a later call raise, naming the
//        silent rank; and the silent rank itself learns it (through the bootstrap) without
//        making another call.
// leave  the last rank closes its communicator while the others' kernel waits for it: they stop
//        well before their (30 s) timeout, raising "rank R closed the communicator".
// abort  the last rank calls abort() while the others' kernel waits for it: they stop well
//        before their (30 s) timeout and raise naming it.
// kill   the last rank SIGKILLs itself in the same place: the same, through the root.
// matrix all_reduce, reduce_scatter, all_gather, broadcast and barrier at 3 sizes (float32),
//        results checked exactly in NaN-poisoned outputs, then each collective with count 0,
//        whose output must keep its poison (run under compute-sanitizer).
// mismatch  the kernels' call check (src/kernels/call_check.hpp): for each kind of disagreement
//        (count on each all-reduce route, forced, and sizes the planner sends to different
//        routes; count 0 against a count; dtype, op, root, collective, barrier against a
//        collective), a fresh group makes
//        one matching all_reduce (checked), then the last rank makes a different call than the
//        others: every rank must raise within 5 s (timeout 30 s) naming both calls. Needs
//        --ids 12 or more.
// Each rank prints "RESULT async <case> rank R: PASS|FAIL <detail>" and exits 0 on PASS.
#include <cuda_runtime.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actorcc/actorcc.hpp"
#include "launch_env.hpp"

using namespace actorcc;
using Clock = std::chrono::steady_clock;

namespace {

int g_rank = 0, g_world = 1;
std::string g_case;
cudaStream_t g_stream = nullptr;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

[[noreturn]] void verdict(bool pass, const std::string& detail) {
  std::printf("RESULT async %s rank %d: %s %s\n", g_case.c_str(), g_rank, pass ? "PASS" : "FAIL", detail.c_str());
  std::fflush(stdout);
  std::_Exit(pass ? 0 : 1);
}

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) verdict(false, std::string(what) + ": " + cudaGetErrorString(e));
}

// Polls check() until it throws (up to `limit` s); returns the error text and the seconds it took,
// or "" when it never threw.
std::string first_error(Communicator& c, double limit, double& took) {
  const auto t0 = Clock::now();
  while (since(t0) < limit) {
    try {
      c.check();
    } catch (const Error& e) {
      took = since(t0);
      return e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  took = since(t0);
  return "";
}

bool names(const std::string& msg, int rank) { return msg.find("rank " + std::to_string(rank)) != std::string::npos; }

// What every rank but the culprit checks after its call's kernel gave up (or stopped): the stream
// went on, and within `bound` s of the call check(), synchronize() and the next call raise,
// naming the culprit.
// `says`: text the error must contain (the cause), if any.
void expect_raised(Communicator& c, float* buf, size_t n, int culprit, double bound, const char* says = nullptr) {
  const auto t0 = Clock::now();
  c.all_reduce(buf, buf, n, DataType::Float32, RedOp::Sum, g_stream);  // enqueued: returns at once
  ck(cudaStreamSynchronize(g_stream), "cudaStreamSynchronize");        // what torch.cuda.synchronize does
  const double synced = since(t0);
  double took = 0;
  const std::string msg = first_error(c, bound, took);
  const double total = since(t0);
  std::ostringstream d;
  d << "stream done after " << synced << " s, error after " << total << " s: " << msg;
  if (msg.empty()) verdict(false, "check() never raised; " + d.str());
  if (!names(msg, culprit)) verdict(false, "the error does not name rank " + std::to_string(culprit) + "; " + d.str());
  if (says && msg.find(says) == std::string::npos) verdict(false, std::string("the error does not say '") + says + "'; " + d.str());
  if (total > bound) verdict(false, "too late; " + d.str());
  for (auto& [what, fn] : std::vector<std::pair<const char*, std::function<void()>>>{
           {"synchronize", [&] { c.synchronize(g_stream); }},
           {"a later all_reduce", [&] { c.all_reduce(buf, buf, n, DataType::Float32, RedOp::Sum, g_stream); }}}) {
    try {
      fn();
      verdict(false, std::string(what) + " did not raise; " + d.str());
    } catch (const Error&) {
    }
  }
  verdict(true, d.str());
}

// ---- matrix ------------------------------------------------------------------------------
template <typename T>
std::vector<T> host_values(size_t n, int rank) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(static_cast<int>((i * 7 + rank * 3) % 11) - 5);
  return v;
}

void run_matrix(Communicator& c) {
  const int W = g_world, me = g_rank;
  int failures = 0, cases = 0;
  for (size_t n : {size_t(1), size_t(1001), size_t(70000)}) {
    float *in = nullptr, *out = nullptr;
    ck(cudaMalloc(&in, n * W * sizeof(float)), "cudaMalloc");
    ck(cudaMalloc(&out, n * W * sizeof(float)), "cudaMalloc");
    std::vector<float> mine = host_values<float>(n * W, me), got(n * W);
    auto expect = [&](const char* what, const std::vector<float>& want, size_t count) {
      ++cases;
      ck(cudaStreamSynchronize(g_stream), what);
      ck(cudaMemcpy(got.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
      for (size_t i = 0; i < count; ++i)
        if (got[i] != want[i]) {
          std::printf("rank %d: %s n=%zu: element %zu is %g, want %g\n", me, what, n, i, got[i], want[i]);
          ++failures;
          return;
        }
    };
    auto upload = [&] {
      ck(cudaMemcpy(in, mine.data(), n * W * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
      ck(cudaMemset(out, 0xff, n * W * sizeof(float)), "cudaMemset");  // poisoned: NaN
    };
    std::vector<float> sum(n * W, 0.f);
    for (int r = 0; r < W; ++r) {
      auto v = host_values<float>(n * W, r);
      for (size_t i = 0; i < n * W; ++i) sum[i] += v[i];
    }
    upload();
    c.all_reduce(in, out, n, DataType::Float32, RedOp::Sum, g_stream);
    expect("all_reduce", sum, n);
    upload();
    c.reduce_scatter(in, out, n, DataType::Float32, RedOp::Sum, g_stream);
    expect("reduce_scatter", std::vector<float>(sum.begin() + me * n, sum.begin() + (me + 1) * n), n);
    upload();
    c.all_gather(in, out, n, DataType::Float32, g_stream);
    std::vector<float> gathered;
    for (int r = 0; r < W; ++r) {
      auto v = host_values<float>(n * W, r);
      gathered.insert(gathered.end(), v.begin(), v.begin() + n);
    }
    expect("all_gather", gathered, n * W);
    upload();
    const int root = W - 1;
    c.broadcast(in, out, n, DataType::Float32, root, g_stream);
    auto rv = host_values<float>(n * W, root);
    expect("broadcast", std::vector<float>(rv.begin(), rv.begin() + n), n);
    c.barrier(g_stream);
    ck(cudaStreamSynchronize(g_stream), "barrier");
    c.check();
    cudaFree(in);
    cudaFree(out);
  }
  // Count 0: every collective meets its peers (as the barrier kernel, with its own descriptor)
  // and moves nothing: the poisoned output keeps every bit.
  {
    float *in = nullptr, *out = nullptr;
    ck(cudaMalloc(&in, 64 * sizeof(float)), "cudaMalloc");
    ck(cudaMalloc(&out, 64 * sizeof(float)), "cudaMalloc");
    ck(cudaMemset(in, 0, 64 * sizeof(float)), "cudaMemset");
    ck(cudaMemset(out, 0xff, 64 * sizeof(float)), "cudaMemset");
    const std::vector<std::pair<const char*, std::function<void()>>> calls = {
        {"all_reduce", [&] { c.all_reduce(in, out, 0, DataType::Float32, RedOp::Sum, g_stream); }},
        {"reduce_scatter", [&] { c.reduce_scatter(in, out, 0, DataType::Float32, RedOp::Sum, g_stream); }},
        {"all_gather", [&] { c.all_gather(in, out, 0, DataType::Float32, g_stream); }},
        {"broadcast", [&] { c.broadcast(in, out, 0, DataType::Float32, W - 1, g_stream); }},
    };
    std::vector<unsigned> bits(64);
    for (const auto& [what, call] : calls) {
      ++cases;
      call();
      ck(cudaStreamSynchronize(g_stream), what);
      c.check();
      ck(cudaMemcpy(bits.data(), out, 64 * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
      if (std::any_of(bits.begin(), bits.end(), [](unsigned b) { return b != 0xffffffffu; })) {
        std::printf("rank %d: %s with count 0 wrote into its output\n", me, what);
        ++failures;
      }
    }
    cudaFree(in);
    cudaFree(out);
  }
  verdict(failures == 0, std::to_string(cases) + " cases, " + std::to_string(failures) + " failures");
}

// ---- mismatch ----------------------------------------------------------------------------
struct MismatchKind {
  const char* name;
  const char* algo;  // forced all-reduce route ("": the planner's)
  std::function<void(Communicator&, float*, float*, bool other)> call;
  const char* mine;  // the call's descriptor as errors print it, and the other rank's
  const char* theirs;
};

std::vector<MismatchKind> mismatch_kinds() {
  using F = float*;
  auto ar = [](size_t n, size_t n2) {
    return [=](Communicator& c, F in, F out, bool o) {
      c.all_reduce(in, out, o ? n2 : n, DataType::Float32, RedOp::Sum, g_stream);
    };
  };
  return {
      {"count_ll", "oneshot", ar(1024, 1536), "all_reduce(count=1024, float32, sum)",
       "all_reduce(count=1536, float32, sum)"},
      {"count_ll128", "oneshot_ll128", ar(262144, 262148), "all_reduce(count=262144, float32, sum)",
       "all_reduce(count=262148, float32, sum)"},
      {"count_push", "oneshot_push", ar(262144, 131072), "all_reduce(count=262144, float32, sum)",
       "all_reduce(count=131072, float32, sum)"},
      {"count_planner", "", ar(2048, 1 << 21), "all_reduce(count=2048, float32, sum)",
       "all_reduce(count=2097152, float32, sum)"},
      {"count_twoshot", "twoshot", ar(1 << 20, (1 << 20) + 64), "all_reduce(count=1048576, float32, sum)",
       "all_reduce(count=1048640, float32, sum)"},
      {"count_pipe", "twoshot_pipe", ar(1 << 20, 3 << 19), "all_reduce(count=1048576, float32, sum)",
       "all_reduce(count=1572864, float32, sum)"},
      {"dtype", "", [](Communicator& c, F in, F out, bool o) {
         c.all_reduce(in, out, 4096, o ? DataType::Int32 : DataType::Float32, RedOp::Sum, g_stream);
       }, "all_reduce(count=4096, float32, sum)", "all_reduce(count=4096, int32, sum)"},
      {"op", "", [](Communicator& c, F in, F out, bool o) {
         c.all_reduce(in, out, 4096, DataType::Float32, o ? RedOp::Max : RedOp::Sum, g_stream);
       }, "all_reduce(count=4096, float32, sum)", "all_reduce(count=4096, float32, max)"},
      {"root", "", [](Communicator& c, F in, F out, bool o) {
         c.broadcast(in, out, 4096, DataType::Float32, o ? 1 : 0, g_stream);
       }, "broadcast(count=4096, float32, root=0)", "broadcast(count=4096, float32, root=1)"},
      {"collective", "", [](Communicator& c, F in, F out, bool o) {
         if (o) c.reduce_scatter(in, out, 2048, DataType::Float32, RedOp::Sum, g_stream);
         else c.all_reduce(in, out, 4096, DataType::Float32, RedOp::Sum, g_stream);
       }, "all_reduce(count=4096, float32, sum)", "reduce_scatter(count=2048, float32, sum)"},
      // A call with nothing to move still meets its peers (as the barrier kernel, with its
      // descriptor): it must not return at once and let the rank's next call pair with this one.
      {"count_zero", "", ar(4096, 0), "all_reduce(count=4096, float32, sum)", "all_reduce(count=0, float32, sum)"},
      {"barrier", "", [](Communicator& c, F in, F out, bool o) {
         if (o) c.barrier(g_stream);
         else c.all_gather(in, out, 4096, DataType::Float32, g_stream);
       }, "all_gather(count=4096, float32)", "barrier()"},
  };
}

// One group per kind (ids[k]); every rank's verdict line lists each kind that failed.
[[noreturn]] void run_mismatch(const std::vector<std::string>& ids) {
  const auto kinds = mismatch_kinds();
  if (ids.size() < kinds.size()) verdict(false, "needs --ids " + std::to_string(kinds.size()));
  const bool other = g_rank == g_world - 1;
  const size_t cap = size_t(4) << 20;  // floats: the largest call's input and output
  float *in = nullptr, *out = nullptr;
  ck(cudaMalloc(&in, cap * sizeof(float)), "cudaMalloc");
  ck(cudaMalloc(&out, cap * sizeof(float)), "cudaMalloc");
  std::vector<float> ones(cap, 1.f), got(4096);
  ck(cudaMemcpy(in, ones.data(), cap * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  int passed = 0;
  std::string failed;
  for (size_t k = 0; k < kinds.size(); ++k) {
    const MismatchKind& m = kinds[k];
    Options o;
    o.backend = Backend::Cuda;
    o.timeout = std::chrono::milliseconds(30000);
    o.algo = m.algo;
    Communicator c(UniqueId::parse(ids[k]), g_rank, g_world, o);
    // A matching call first: the check must never refuse one, and its result must be exact.
    ck(cudaMemset(out, 0xff, 4096 * sizeof(float)), "cudaMemset");
    c.all_reduce(in, out, 4096, DataType::Float32, RedOp::Sum, g_stream);
    c.synchronize(g_stream);
    ck(cudaMemcpy(got.data(), out, 4096 * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    bool ok = std::all_of(got.begin(), got.end(), [](float v) { return v == float(g_world); });
    c.host_barrier();
    const auto t0 = Clock::now();
    std::string msg;
    try {
      m.call(c, in, out, other);
    } catch (const Error& e) {
      msg = e.what();
    }
    double took = 0;
    if (msg.empty()) msg = first_error(c, 5.0, took);
    took = since(t0);
    const std::string mine = other ? m.theirs : m.mine, theirs = other ? m.mine : m.theirs;
    ok = ok && !msg.empty() && took < 5.0 && msg.find(mine) != std::string::npos &&
         msg.find(theirs) != std::string::npos;
    std::printf("MISMATCH %s rank %d: %s after %.3f s: %s\n", m.name, g_rank, ok ? "PASS" : "FAIL", took,
                msg.empty() ? "no error" : msg.c_str());
    std::fflush(stdout);
    if (ok) ++passed;
    else failed += std::string(failed.empty() ? "" : ", ") + m.name;
    cudaStreamSynchronize(g_stream);
    cudaGetLastError();
  }
  verdict(passed == int(kinds.size()), std::to_string(passed) + " of " + std::to_string(kinds.size()) +
                                           " mismatch kinds raised naming both calls" +
                                           (failed.empty() ? "" : "; failed: " + failed));
}

}  // namespace

int main(int argc, char** argv) {
  g_case = argc > 1 ? argv[1] : "";
  const auto launched = gpu_launch::worker_env("gpu_async_errors");
  if (!launched) return 2;
  g_rank = launched->rank;
  g_world = launched->world;
  const std::vector<std::string>& all_ids = launched->ids;
  const std::string id = all_ids.front();
  const int culprit = g_world - 1;
  try {
    ck(cudaSetDevice(0), "cudaSetDevice");
    ck(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking), "cudaStreamCreate");
    if (g_case == "mismatch") run_mismatch(all_ids);
    Options o;
    o.backend = Backend::Cuda;
    // stall: a short timeout to wait out; leave / abort / kill must not need it; the matrix may
    // run slowly under compute-sanitizer.
    o.timeout = std::chrono::milliseconds(g_case == "stall" ? 2000 : 30000);
    auto c = std::make_unique<Communicator>(UniqueId::parse(id), g_rank, g_world, o);
    if (g_case == "matrix") run_matrix(*c);
    const size_t n = size_t(1) << 18;  // 1 MiB of float32
    float* buf = nullptr;
    ck(cudaMalloc(&buf, n * sizeof(float)), "cudaMalloc");
    ck(cudaMemset(buf, 0, n * sizeof(float)), "cudaMemset");
    c->all_reduce(buf, buf, n, DataType::Float32, RedOp::Sum, g_stream);  // warm-up: the group works
    c->synchronize(g_stream);
    c->host_barrier();
    if (g_case == "stall") {
      if (g_rank != culprit) expect_raised(*c, buf, n, culprit, 2.0 + 1.5);
      // Silent for longer than the others' timeout, then: the error is here with no call made.
      std::this_thread::sleep_for(std::chrono::milliseconds(4000));
      double took = 0;
      const std::string msg = first_error(*c, 0.5, took);
      verdict(!msg.empty() && names(msg, culprit), "after the silence, check(): " + (msg.empty() ? "no error" : msg));
    }
    if (g_case == "leave") {
      if (g_rank != culprit) expect_raised(*c, buf, n, culprit, 3.0, "closed the communicator");  // timeout: 30 s
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the others are in their kernel
      c.reset();
      verdict(true, "closed its communicator");
    }
    if (g_case == "abort" || g_case == "kill") {
      if (g_rank != culprit) expect_raised(*c, buf, n, culprit, 3.0);  // the timeout is 30 s
      std::this_thread::sleep_for(std::chrono::milliseconds(500));     // the others are in their kernel
      if (g_case == "kill") {
        std::printf("RESULT async kill rank %d: PASS killing itself\n", g_rank);
        std::fflush(stdout);
        ::kill(::getpid(), SIGKILL);
      }
      c->abort("test abort by the last rank");
      verdict(true, "aborted");
    }
    verdict(false, "unknown case '" + g_case + "' (stall, leave, abort, kill, matrix, mismatch)");
  } catch (const std::exception& e) {
    verdict(false, std::string("unexpected exception: ") + e.what());
  }
}
