// One rank of a multiprocess test (public API only): the modes below; the matrices live in
// matrix.cpp / p2p_matrix.cpp, the fault modes in faults.cpp, the shared reference maths in
// tests/common/. Spawned by test_multiprocess.cpp:
//   mp_worker --id HEX --rank R --world W --mode MODE [--timeout-ms T] [--delay-ms D]
//             [--counts 0,1,7] [--big-subset] [--culprit C] [--hold-ms H] [--seed S]
// Modes:
//   matrix       every collective x dtype x op x count, in and out of place, checked
//   loop         all_reduce until a RemoteError (or TimeoutError) naming --culprit arrives
//                (the driver kills or stops that peer)
//   loop_a2a     the same with all_to_all
//   abort        rank --culprit calls abort(); the others expect a RemoteError naming it
//   join_error   joining must fail with InvalidArgument (tampered id, duplicate rank), or
//                with UnsupportedError given --expect unsupported
//   hold         join, print JOINED, wait --hold-ms, then a checked all_reduce; given
//                --expect poisoned, that all_reduce must fail saying a rank is claimed twice
//   badargs      bad arguments raise InvalidArgument and a group of one stays usable
//   bad_call     rank --culprit makes a call with a bad argument (--bad says which) while the
//                others make the same call rightly: it gets InvalidArgument, every other rank
//                (waiting in the call, or entering it later) a RemoteError naming it and why
//   fault        rank --culprit injects --fault (kill | stop | exit | throw) at --phase
//                (before_join | during_join | during_setup | during_mesh | large_call |
//                between_calls), printing FAULT first;
//                the others loop all_reduce and expect an error naming the culprit
//   elastic      shrink and grow scenarios (--phase kill_between | kill_large | trial | planned |
//                shrink_kill | grow_kill | cycles | newcomer | newcomer_dies; elastic.cpp)
//   shm_removal  rank --culprit's group segment is removed (--phase removed) or swept from
//                another pid namespace (--phase pidns_sweep) before it maps it (shm_removal.cpp)
//   suspend      suspend/resume cycles, a second suspend, ranks that disagree (--phase cycles |
//                again | mixed; suspend.cpp)
//   sweep_group  a group of one (its own id), whose setup sweeps /dev/shm for orphans
//   link_cut     all_reduce until the link between nodes is cut; the error must name a rank on
//                another node (driven by tcp_nodes.sh netns)
//   (--port P [--host H]: form the group with from_address on H:P (default 127.0.0.1), rank 0
//   hosting the root)
// Exit codes: 0 pass, 1 wrong data, 2 unexpected exception, 3 expectation not met.
// Progress lines go to stdout ("JOINED", "LOOPING"), diagnostics to stderr.
#include <chrono>
#include <iostream>
#include <thread>

#include "faults.hpp"
#include "matrix.hpp"
#include "worker_args.hpp"

namespace mpw {
namespace {

int run(const Args& a) {
  if (a.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.delay_ms));
  if (a.mode == "fault") return fault_run(a);
  if (a.mode == "link_cut") return link_cut_run(a);
  if (a.mode == "elastic") return elastic_run(a);
  if (a.mode == "shm_removal") return shm_removal_run(a);
  if (a.mode == "suspend") return suspend_run(a);
  if (a.mode == "sweep_group") return sweep_group_run(a);
  const UniqueId id = UniqueId::parse(a.id);
  const std::string tag = "rank " + std::to_string(a.rank);

  if (a.mode == "join_error") {
    try {
      Communicator c(id, a.rank, a.world, options_for(a));
    } catch (const Error& e) {
      std::cerr << tag << " join failed as expected (" << to_string(e.code()) << "): " << e.what() << std::endl;
      const ErrorCode want = a.expect == "unsupported" ? ErrorCode::Unsupported : ErrorCode::InvalidArgument;
      return e.code() == want ? 0 : 3;
    }
    std::cerr << tag << " joined although it should have been rejected" << std::endl;
    return 3;
  }

  Communicator c(id, a.rank, a.world, options_for(a));
  std::cout << "JOINED" << std::endl;

  if (a.mode == "matrix") {
    const uint64_t seed = agree_seed(c, a.seed);
    const auto t0 = std::chrono::steady_clock::now();
    Matrix m(c, a, seed);
    m.run_all();
    if (a.rank == 0) std::cout << m.tally().table() << std::flush;  // the driver prints rank 0's table
    std::cerr << tag << " matrix passed in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s (seed " << seed << ")"
              << std::endl;
    return 0;
  }
  if (a.mode == "p2p") {
    const uint64_t seed = agree_seed(c, a.seed);
    const auto t0 = std::chrono::steady_clock::now();
    Matrix m(c, a, seed);
    m.run_p2p();
    small_all_reduce_check(c);  // the slots and channels do not disturb each other
    if (a.rank == 0) std::cout << m.tally().table() << std::flush;  // the driver prints rank 0's table
    std::cerr << tag << " p2p matrix passed in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s (seed " << seed << ")"
              << std::endl;
    return 0;
  }
  if (a.mode == "p2p_mismatch") return p2p_mismatch(c, a, tag);
  if (a.mode == "bench") {  // latency/bandwidth probe, not a test: prints one line per size
    for (size_t bytes : {size_t{4}, size_t{4096}, size_t{65536}, size_t{1} << 20, size_t{16} << 20}) {
      std::vector<float> v(bytes / 4, 1.0f);
      const int iters = bytes <= 65536 ? 2000 : 20;
      c.all_reduce(v.data(), v.data(), v.size(), DataType::Float32, RedOp::Sum);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) c.all_reduce(v.data(), v.data(), v.size(), DataType::Float32, RedOp::Sum);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
      if (a.rank == 0) std::cerr << "all_reduce " << bytes << " B: " << us << " us, " << bytes / us / 1e3 << " GB/s" << std::endl;
    }
    return 0;
  }
  if (a.mode == "loop") return loop_until_remote_error(c, a.culprit, tag);
  if (a.mode == "loop_a2a") return loop_until_remote_error(c, a.culprit, tag, true);
  if (a.mode == "abort") {
    std::vector<float> v(100, 1.0f);
    for (int i = 0; i < 5; ++i) c.all_reduce(v.data(), v.data(), v.size(), DataType::Float32, RedOp::Sum);
    if (a.rank == a.culprit) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the others block in a call
      c.abort("test abort");
      return 0;
    }
    return loop_until_remote_error(c, a.culprit, tag);
  }
  if (a.mode == "hold") {
    std::this_thread::sleep_for(std::chrono::milliseconds(a.hold_ms));
    if (a.expect != "poisoned") {
      small_all_reduce_check(c);
      return 0;
    }
    try {
      small_all_reduce_check(c);
    } catch (const Error& e) {
      std::cerr << tag << " poisoned as expected: " << e.what() << std::endl;
      return std::string(e.what()).find("claimed twice") != std::string::npos ? 0 : 3;
    }
    std::cerr << tag << " the group worked although a rank was claimed twice" << std::endl;
    return 3;
  }
  if (a.mode == "bad_call") return bad_call(c, a, tag);
  if (a.mode == "badargs") {
    int expected_errors = 0;
    auto expect_invalid = [&](const char* what, auto&& fn) {
      try {
        fn();
        std::cerr << tag << ": " << what << " was accepted" << std::endl;
      } catch (const InvalidArgument& e) {
        ++expected_errors;
        std::cerr << tag << ": " << what << " -> " << e.what() << std::endl;
      }
    };
    std::vector<float> v(16, 1.0f);
    expect_invalid("null send", [&] { c.all_reduce(nullptr, v.data(), v.size(), DataType::Float32, RedOp::Sum); });
    expect_invalid("null recv", [&] { c.all_gather(v.data(), nullptr, 4, DataType::Float32); });
    expect_invalid("root out of range", [&] { c.broadcast(v.data(), v.data(), v.size(), DataType::Float32, a.world); });
    expect_invalid("negative root", [&] { c.broadcast(v.data(), v.data(), v.size(), DataType::Float32, -1); });
    small_all_reduce_check(c);
    return expected_errors == 4 ? 0 : 3;
  }
  std::cerr << "unknown mode " << a.mode << std::endl;
  return 2;
}

}  // namespace
}  // namespace mpw

int main(int argc, char** argv) {
  using namespace mpw;
  const Args a = parse(argc, argv);
  try {
    return run(a);
  } catch (const Failure& f) {
    std::cerr << "FAIL " << f.what() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "rank " << a.rank << " unexpected exception: " << e.what() << std::endl;
    return 2;
  }
}
