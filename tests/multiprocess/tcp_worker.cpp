// One rank of a TCP transport test (driven by tcp_nodes.sh): joins the group whose root rank
// 0 hosts at host:port, connects the TCP mesh with every other rank, then
//   check: exchanges fresh random data of odd and large sizes with every peer (each shift of
//          a ring, both directions at once) and verifies every byte; prints "ok".
//   until-error: prints "ready", then exchanges 64 KiB with every peer, over and over, each
//          exchange bounded by <op-timeout-ms>, until something fails; prints the error on
//          stderr and exits 3. (The driver kills a rank or cuts a link meanwhile.)
// Exit codes: 0 ok, 3 the expected failure, 1 anything else.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actorcc/error.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/id_fields.hpp"
#include "transport/tcp/mesh.hpp"

using namespace actorcc;
using namespace std::chrono;

namespace {

std::vector<uint8_t> pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t x = rng();
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, n - i));
  }
  return v;
}

// Ring shift s: send to rank + s, receive from rank - s, for every s.
void exchange_with_all(tcp::Mesh& mesh, int r, int world, size_t n, uint64_t seed, uint64_t tag, milliseconds timeout,
                       const AbortSignal* abort, bool verify) {
  for (int s = 1; s < world; ++s) {
    int to = (r + s) % world, from = (r - s + world) % world;
    auto out = pattern(n, seed ^ (uint64_t(r) << 32 | uint64_t(to)));
    std::vector<uint8_t> got(n, 0x5A);
    tcp::exchange(&mesh.pair(to), out.data(), n, &mesh.pair(from), got.data(), n, tag * world + s,
                  Deadline::after(timeout), abort);
    if (verify && got != pattern(n, seed ^ (uint64_t(from) << 32 | uint64_t(r))))
      throw std::runtime_error("rank " + std::to_string(r) + ": wrong bytes from rank " + std::to_string(from) +
                               " (" + std::to_string(n) + " bytes)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: tcp_worker check|until-error RANK WORLD HOST PORT SEED OP_TIMEOUT_MS\n");
    return 1;
  }
  std::string mode = argv[1];
  int rank = std::atoi(argv[2]), world = std::atoi(argv[3]);
  std::string host = argv[4];
  uint16_t port = static_cast<uint16_t>(std::atoi(argv[5]));
  uint64_t seed = std::strtoull(argv[6], nullptr, 10);
  milliseconds op_timeout(std::atoi(argv[7]));
  auto abort = std::make_shared<AbortSignal>(rank);
  std::unique_ptr<Bootstrap> bs;
  try {
    UniqueId id = address_unique_id(host, port, world);
    if (rank == 0) start_root_for(id);
    bootstrap::IdFields f = bootstrap::read_id(id);
    bs = Bootstrap::join(id, rank, world, "tcp-worker", Deadline::after(seconds(30)), abort);
    std::vector<int> peers;
    for (int q = 0; q < world; ++q)
      if (q != rank) peers.push_back(q);
    auto mesh = tcp::Mesh::connect(*bs, f.token, f.root, peers, Deadline::after(seconds(30)), abort.get());
    if (mode == "check") {
      uint64_t tag = 0;
      for (size_t n : {size_t{0}, size_t{1}, size_t{13}, size_t{65536 + 7}, (size_t{5} << 20) + 1})
        exchange_with_all(*mesh, rank, world, n, seed + n, tag++, op_timeout, abort.get(), true);
      bs->barrier(Deadline::after(seconds(30)));
      std::printf("ok\n");
      return 0;
    }
    if (mode != "until-error") throw InvalidArgument("unknown mode " + mode);
    std::printf("ready\n");
    std::fflush(stdout);
    for (uint64_t i = 0;; ++i) {
      exchange_with_all(*mesh, rank, world, 64 << 10, seed + i, i, op_timeout, abort.get(), true);
      std::this_thread::sleep_for(milliseconds(5));
    }
  } catch (const std::exception& e) {
    std::string cause = e.what();
    if (bs) {
      // As backends/hier does, the failure's cause reaches every rank through the bootstrap's
      // abort. A connection broken by a dead or failing peer comes with news from the root
      // (that peer's EOF there, or its abort), so wait briefly for it: then this rank reports
      // the group's first failure, not only the peer it lost last; without news (a silent
      // link), this rank's own cause is the first and goes to the others.
      for (auto end = steady_clock::now() + seconds(1); !abort->raised() && steady_clock::now() < end;)
        std::this_thread::sleep_for(milliseconds(5));
      if (!abort->raised()) bs->abort(cause);
      else if (cause.find(abort->reason()) == std::string::npos)
        cause += " (the group's first failure: " + abort->reason() + ")";
      // Let the abort leave before this process's sockets close under the others.
      std::this_thread::sleep_for(milliseconds(200));
    }
    std::fprintf(stderr, "error: %s\n", cause.c_str());
    std::fflush(stderr);
    // No destructors: a rank that lost its peers leaves at once, as a failing actor would.
    _exit(mode == "until-error" ? 3 : 1);
  }
}
