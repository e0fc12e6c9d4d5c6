// Refusals, aborts and timeouts (failures.hpp).
#include "failures.hpp"

#include <chrono>
#include <thread>

#include "cases.hpp"

namespace gw {

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
  {
    const CaseScope cs("bad_buffer", DataType::Float32, "sum", host.size() * 4);
    try {
      c.all_reduce(send[k], recv[k], host.size(), DataType::Float32, RedOp::Sum, g_stream);
      fail(std::string("bad buffer accepted: ") + what[k]);
    } catch (const InvalidArgument& e) {
      if (std::string(e.what()).find("buffer") == std::string::npos) fail(std::string("unclear error for ") + what[k] + ": " + e.what());
    }
  }
  {
    const CaseScope cs("bad_buffer_abort", DataType::Float32, "sum", host.size() * 4);
    try {
      c.all_reduce(dev, dev, host.size(), DataType::Float32, RedOp::Sum, g_stream);
      fail("a call after a refused bad buffer ran on the aborted group");
    } catch (const RemoteError& e) {
      if (std::string(e.what()).find("bad argument") == std::string::npos) fail(std::string("unclear abort after a bad buffer: ") + e.what());
    }
  }
  cudaFree(dev);
}

// Rank 1 passes an output that is not the registered buffer rank 0 uses: the pipe must refuse
// the call on both ranks (at the next call, naming the registration) rather than store into
// memory rank 1 did not offer, and nothing may hang. The rank whose kernel finds it raises
// InvalidArgument; a rank that hears it from that rank first raises RemoteError with the same
// text (docs/reliability.md: first cause wins), and either rank may be the finder.
void test_registration_mismatch() {
  const CaseScope cs("reg_mismatch", DataType::Float32, "sum", (1 << 20) * 4);
  auto c = make_comm("registration-mismatch", "twoshot_pipe");
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
  } catch (const Error& e) {
    const bool kind_ok = e.code() == ErrorCode::InvalidArgument || e.code() == ErrorCode::Remote;
    if (!kind_ok) fail(std::string("registration mismatch: wrong error: ") + e.what());
    else if (std::string(e.what()).find("registered") == std::string::npos) fail(std::string("unclear mismatch error: ") + e.what());
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
void refused_without_share_setting() {
  const CaseScope cs("share_refused", DataType::Float32, "-", 0);
  try {
    auto c = make_comm("share-gpu-refused", "", {{"ACTORCC_CUDA_SHARE_GPU", "0"}});
    fail("ranks sharing a GPU were accepted without the setting (plan: " + c->plan(Collective::AllReduce, 4096) + ")");
  } catch (const std::exception& e) {
    if (std::string(e.what()).find("share GPU") == std::string::npos)
      fail(std::string("shared GPU refused with an unclear error: ") + e.what());
    else if (g_rank == 0) std::printf("shared GPU without the setting: %s\n", e.what());
  }
}

void abort_and_timeout_tests() {
  // a) abort: rank 1 calls abort() while rank 0's kernel waits for it; the kernel must stop
  //    early (abort word) and the next call must throw RemoteError naming rank 1.
  {
    const CaseScope cs("abort", DataType::Float32, "sum", (1 << 20) * 4);
    auto c = make_comm("abort", "", {}, std::chrono::seconds(20));
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
  const CaseScope cs("timeout", DataType::Float32, "sum", 1024 * 4);
  auto c = make_comm("timeout", "", {}, std::chrono::milliseconds(2000));
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

}  // namespace gw
