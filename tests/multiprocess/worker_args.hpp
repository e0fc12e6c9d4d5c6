// What every mode of mp_worker shares: the command line, the communicator's options, the
// failure type (exit code 1), the seed agreed from rank 0 and a short check that a group still
// works.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "actorcc/actorcc.hpp"

namespace mpw {

using namespace actorcc;

struct Args {
  std::string id, mode = "matrix", expect = "invalid";  // join_error: invalid | unsupported; hold: poisoned
  std::string fault = "kill", phase = "between_calls", bad = "null_send";
  int port = 0;
  std::string host = "127.0.0.1";  // with --port: the address rank 0 hosts the root at
  int rank = 0, world = 1, culprit = -1;
  int victim = -1, cycles = 20;  // elastic: a second fault's rank; shrink/grow cycles
  std::string dir;               // elastic cycles: where rank 0 leaves each grown group's id
  int64_t timeout_ms = 60000, delay_ms = 0, hold_ms = 0, join_timeout_ms = 0;
  std::vector<size_t> counts = {0, 1, 7, 4097, size_t{1} << 20};
  bool big_subset = false;  // the largest count only for sum (keeps world 8 fast on 2 cores)
  uint64_t seed = 0;
};

inline Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--id") a.id = v;
    else if (k == "--rank") a.rank = std::stoi(v);
    else if (k == "--world") a.world = std::stoi(v);
    else if (k == "--mode") a.mode = v;
    else if (k == "--expect") a.expect = v;
    else if (k == "--timeout-ms") a.timeout_ms = std::stoll(v);
    else if (k == "--join-timeout-ms") a.join_timeout_ms = std::stoll(v);
    else if (k == "--delay-ms") a.delay_ms = std::stoll(v);
    else if (k == "--hold-ms") a.hold_ms = std::stoll(v);
    else if (k == "--culprit") a.culprit = std::stoi(v);
    else if (k == "--seed") a.seed = std::stoull(v);
    else if (k == "--big-subset") a.big_subset = v == "1";
    else if (k == "--fault") a.fault = v;
    else if (k == "--phase") a.phase = v;
    else if (k == "--bad") a.bad = v;
    else if (k == "--port") a.port = std::stoi(v);
    else if (k == "--host") a.host = v;
    else if (k == "--victim") a.victim = std::stoi(v);
    else if (k == "--cycles") a.cycles = std::stoi(v);
    else if (k == "--dir") a.dir = v;
    else if (k == "--counts") {
      a.counts.clear();
      std::stringstream ss(v);
      for (std::string t; std::getline(ss, t, ',');) a.counts.push_back(std::stoull(t));
    }
  }
  return a;
}

// A wrong result: mp_worker exits 1 with the message.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Rank 0 picks a fresh seed (or --seed) and shares it, so every run tests new inputs and a
// failure message carries what reproduces it.
inline uint64_t agree_seed(Communicator& c, uint64_t forced) {
  uint64_t s = forced ? forced : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  auto all = c.allgather_bytes(std::string(reinterpret_cast<const char*>(&s), sizeof s));
  std::memcpy(&s, all.at(0).data(), sizeof s);
  return s;
}

inline Options options_for(const Args& a) {
  Options o;
  o.backend = Backend::Cpu;
  o.timeout = std::chrono::milliseconds(a.timeout_ms);
  o.join_timeout = std::chrono::milliseconds(a.join_timeout_ms > 0 ? a.join_timeout_ms
                                                                    : std::max<int64_t>(a.timeout_ms, 20000));
  return o;
}

inline void small_all_reduce_check(Communicator& c) {
  std::vector<int32_t> v(1000, c.rank() + 1);
  c.all_reduce(v.data(), v.data(), v.size(), DataType::Int32, RedOp::Sum);
  const int n = c.world_size();
  for (int32_t x : v)
    if (x != n * (n + 1) / 2) throw Failure("rank " + std::to_string(c.rank()) + ": all_reduce after the test is wrong");
}

inline std::unique_ptr<Communicator> make_comm(const Args& a) {
  if (a.port > 0) return Communicator::from_address(a.host, static_cast<uint16_t>(a.port), a.rank, a.world, options_for(a));
  return std::make_unique<Communicator>(UniqueId::parse(a.id), a.rank, a.world, options_for(a));
}

}  // namespace mpw
