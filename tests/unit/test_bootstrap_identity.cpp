// Who a group is: two launches that share a from_address address never
// return each other's data without an error, another run's rank is refused before it is a claim,
// and a HELLO captured on the wire cannot be replayed to a later group on the same address.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "actorcc/error.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/frame_io.hpp"
#include "bootstrap/id_fields.hpp"
#include "bootstrap_harness.hpp"

using namespace bootstrap_test;

namespace {

// A TCP relay on a port of its own to `to`, recording what its one client sends: what someone
// who can watch the loopback sees of a rank's join.
class RecordingRelay {
 public:
  explicit RecordingRelay(const net::SockAddr& to)
      : listener_(net::listen_on(*net::resolve("127.0.0.1", 0))), to_(to) {
    port_ = net::local_address(listener_.get()).port();
    thread_ = std::thread([this] { run(); });
  }
  ~RecordingRelay() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return port_; }
  // The first whole frame the client sent (its HELLO), once it is in.
  std::string first_frame() {
    std::lock_guard<std::mutex> g(mu_);
    if (sent_.size() < wire::kHeaderBytes) return {};
    const wire::Header h = wire::decode_header(sent_.data(), wire::kHeaderBytes);
    if (sent_.size() < wire::kHeaderBytes + h.length) return {};
    return sent_.substr(0, wire::kHeaderBytes + h.length);
  }

 private:
  void run() {
    net::Fd client, server;
    while (!stop_ && !client) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) > 0) client.reset(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    }
    if (!client) return;
    server = net::connect_with_retry(to_, in(milliseconds(2000)), nullptr, -1);
    char buf[65536];
    while (!stop_) {
      pollfd p[2] = {{client.get(), POLLIN, 0}, {server.get(), POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = ::recv(p[i].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0) return;  // either side closed: the relay's work is done
        if (i == 0) {
          std::lock_guard<std::mutex> g(mu_);
          sent_.append(buf, static_cast<size_t>(n));
        }
        net::send_all(p[1 - i].fd, buf, static_cast<size_t>(n), in(milliseconds(2000)));
      }
    }
  }
  net::Fd listener_;
  net::SockAddr to_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string sent_;
  std::thread thread_;
};

// The id of `aid`'s group with another root port: a rank that joins through it reaches the
// relay, and proves the same token.
UniqueId through_port(const UniqueId& aid, uint16_t port) {
  bootstrap::IdFields f = bootstrap::read_id(aid);
  f.root.set_port(port);
  return bootstrap::make_id(f);
}

// These tests play launches without a run id: none may come from the environment they run in.
void clear_run_ids() {
  for (const char* v : {"ACTORCC_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"}) ::unsetenv(v);
}

// Starts the from_address root of `aid` once the previous one has let go of the port.
void start_root_again(const UniqueId& aid) {
  for (int i = 0; i < 100; ++i) {
    try {
      start_root_for(aid);
      return;
    } catch (const SystemError&) {
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  FAIL() << "the first group's root never let go of the port";
}

}  // namespace

// Hole 8: rank 1's HELLO to one group, captured on the loopback, is sent to a later group on the
// same address (same host, port, world and secret). Before, the token travelled in it and was a
// fixed function of those: the replay was admitted as rank 1 and the real rank 1 was refused.
// Now the HELLO answers its root's challenge on that one connection: the replay is refused and
// the real rank 1 joins.
TEST(BootstrapIdentity, ReplayedHelloIsRefusedAndTheRealRankStillJoins) {
  clear_run_ids();
  const uint16_t port = free_port();
  const UniqueId aid = address_unique_id("127.0.0.1", port, 2);
  std::string captured;
  {
    start_root_for(aid);
    RecordingRelay relay(bootstrap::read_id(aid).root);
    const UniqueId via = through_port(aid, relay.port());
    expect_ok(run_ranks(2, [&](int r) { join(r == 0 ? aid : via, r, 2)->barrier(in(milliseconds(5000))); }));
    captured = relay.first_frame();
  }
  ASSERT_FALSE(captured.empty()) << "the relay saw no HELLO";

  start_root_again(aid);
  net::Fd replay = raw_connect(aid);  // reads (and ignores) this root's challenge
  ASSERT_EQ(net::send_all(replay.get(), captured.data(), captured.size(), in(milliseconds(2000))).status,
            net::IoStatus::Ok);
  auto answer = wire::recv_message(replay.get(), in(milliseconds(3000)));
  ASSERT_TRUE(answer.msg) << "the replay got no answer: " << answer.io.detail;
  ASSERT_TRUE(std::holds_alternative<wire::Reject>(*answer.msg))
      << "the replayed HELLO was not refused: " << wire::to_string(wire::type_of(*answer.msg));
  EXPECT_TRUE(contains(std::get<wire::Reject>(*answer.msg).reason, "wrong token"))
      << std::get<wire::Reject>(*answer.msg).reason;
  expect_ok(run_ranks(2, [&](int r) {
    auto b = join(aid, r, 2, milliseconds(5000));
    EXPECT_EQ(b->peer_blobs()[1], "blob-1");  // the real rank 1
    b->barrier(in(milliseconds(5000)));
  }));
}

namespace {

// One rank of two launches A and B of a 2-rank from_address group on one address, without a run
// id (every thread of this process shares its environment): rank 0 starts the root (B's fails:
// A's holds the port), then each rank joins and all-gathers its launch's name. What it returns
// is either an error or the blobs it got.
struct Outcome {
  bool ok = false;
  std::string text;  // the error, or the blobs joined by ','
};

Outcome run_launch_rank(const UniqueId& aid, char launch, int rank) {
  Outcome o;
  try {
    if (rank == 0) start_root_for(aid);
    auto b = Bootstrap::join(aid, rank, 2, std::string(1, launch), in(milliseconds(8000)),
                             std::make_shared<AbortSignal>(rank));
    auto got = b->allgather(std::string(1, launch) + std::to_string(rank), in(milliseconds(8000)));
    o.ok = true;
    for (auto& s : got) o.text += s + ",";
  } catch (const std::exception& e) {
    o.text = e.what();
  }
  return o;
}

// The contract: a rank returns only its own launch's data; else it raises an error.
void expect_no_mixed_data(const std::map<std::string, Outcome>& out) {
  for (const auto& [who, o] : out) {
    if (!o.ok) continue;
    const std::string own = std::string(1, who[0]) + "0," + std::string(1, who[0]) + "1,";
    EXPECT_EQ(o.text, own) << who << " returned another launch's data without an error";
  }
}

}  // namespace

// Hole 1, the exact scenario: two 2-rank launches on one address, started close together, in
// the orders that can be forced. A's rank 0 holds the port; B's rank 0 cannot listen and tells
// A's root (two roots); B's rank 1 reaches A's root, and either it or A's rank 1 is the second
// claim of rank 1. Each shows within the root's claim window, so every rank fails, naming the
// conflict, and none returns data. Before, A0 and B1 formed a group and both returned each
// other's data.
TEST(BootstrapIdentity, TwoLaunchesOnOneAddressNeverMixTheirData) {
  clear_run_ids();
  struct Order {
    const char* name;
    std::vector<std::string> starts;  // in this order, 100 ms apart
  };
  const std::vector<Order> orders = {
      {"A0 B0 B1 A1", {"A0", "B0", "B1", "A1"}},  // the second root shows first
      {"A0 B1 A1 B0", {"A0", "B1", "A1", "B0"}},  // the intruder is admitted, the real A1 comes second
      {"A0 A1 B1 B0", {"A0", "A1", "B1", "B0"}},  // A complete, the intruder's claim comes second
      {"B1 A1 A0 B0", {"B1", "A1", "A0", "B0"}},  // both ranks 1 retry before any root is up
  };
  for (const auto& order : orders) {
    SCOPED_TRACE(order.name);
    const uint16_t port = free_port();
    const UniqueId aid = address_unique_id("127.0.0.1", port, 2);
    std::map<std::string, Outcome> out;
    std::mutex mu;
    std::vector<std::thread> ts;
    for (const auto& who : order.starts) {
      ts.emplace_back([&, who] {
        Outcome o = run_launch_rank(aid, who[0], who[1] - '0');
        std::lock_guard<std::mutex> g(mu);
        out[who] = o;
      });
      std::this_thread::sleep_for(milliseconds(100));
    }
    for (auto& t : ts) t.join();
    expect_no_mixed_data(out);
    for (const auto& [who, o] : out) {
      EXPECT_FALSE(o.ok) << who << " formed a group: " << o.text;
      // B0 also says why it cannot host; every error names the conflict (the first one the root
      // saw: the second root, or the second claim of rank 1).
      if (who == "B0") EXPECT_TRUE(contains(o.text, "127.0.0.1:" + std::to_string(port) + ": the port is already in use"))
          << o.text;
      EXPECT_TRUE(contains(o.text, "two roots for 127.0.0.1:" + std::to_string(port)) ||
                  contains(o.text, "rank 1 is claimed twice"))
          << who << ": " << o.text;
    }
  }
}

// A claim that comes after the window (a launch started seconds later) still poisons the group
// at once: what was returned before was the group's own data, and every later call fails.
TEST(BootstrapIdentity, ALateSecondClaimPoisonsAFormedGroup) {
  clear_run_ids();
  const uint16_t port = free_port();
  const UniqueId aid = address_unique_id("127.0.0.1", port, 2);
  std::vector<std::unique_ptr<Bootstrap>> a(2);
  expect_ok(run_ranks(2, [&](int r) {
    if (r == 0) start_root_for(aid);
    a[r] = join(aid, r, 2);
    EXPECT_EQ(a[r]->allgather("A" + std::to_string(r), in(milliseconds(5000))), (std::vector<std::string>{"A0", "A1"}));
  }));
  const Outcome b1 = run_launch_rank(aid, 'B', 1);
  const Outcome b0 = run_launch_rank(aid, 'B', 0);
  EXPECT_FALSE(b1.ok) << b1.text;
  EXPECT_TRUE(contains(b1.text, "rank 1 already joined from host")) << b1.text;
  EXPECT_FALSE(b0.ok) << b0.text;
  EXPECT_TRUE(contains(b0.text, "already in use")) << b0.text;
  for (int r = 0; r < 2; ++r) {
    auto msg = expect_throw<RemoteError>([&] { a[r]->allgather("again", in(milliseconds(5000))); });
    EXPECT_TRUE(contains(msg, "rank 1 is claimed twice")) << msg;
  }
}

// With a run id (here ACTORCC_RUN_ID; a launcher's own id where it sets one) a rank of another
// run is refused before it is a claim, named with both run ids, and the group goes on.
TEST(BootstrapIdentity, ARankOfAnotherRunIsRefusedAndTheGroupForms) {
  ::setenv("ACTORCC_RUN_ID", "run-a", 1);
  const uint16_t port = free_port();
  const UniqueId aid = address_unique_id("127.0.0.1", port, 2);
  start_root_for(aid);
  wire::Hello other = hello_for(aid, 1, 2);
  other.run_id = "run-b";
  other.run_id_from = "SLURM_JOB_ID";
  other.pid = 4242;
  other.host = "elsewhere";
  auto m = raw_exchange(aid, other);
  ASSERT_TRUE(std::holds_alternative<wire::Reject>(m));
  const std::string why = std::get<wire::Reject>(m).reason;
  EXPECT_TRUE(contains(why, "rank 1 (host elsewhere pid 4242")) << why;
  EXPECT_TRUE(contains(why, "run 'run-b' (from SLURM_JOB_ID)")) << why;
  EXPECT_TRUE(contains(why, "run 'run-a' (from ACTORCC_RUN_ID)")) << why;
  // A second root of run b is refused the same way, and this group is not poisoned by it.
  ::setenv("ACTORCC_RUN_ID", "run-b", 1);
  auto second = expect_throw<SystemError>([&] { start_root_for(aid); });
  EXPECT_TRUE(contains(second, "already in use")) << second;
  EXPECT_TRUE(contains(second, "run 'run-a'")) << second;
  ::setenv("ACTORCC_RUN_ID", "run-a", 1);
  expect_ok(run_ranks(2, [&](int r) {
    auto b = join(aid, r, 2, milliseconds(5000));
    EXPECT_EQ(b->allgather(std::to_string(r), in(milliseconds(5000))), (std::vector<std::string>{"0", "1"}));
  }));
  ::unsetenv("ACTORCC_RUN_ID");
}

// Protocol 3 against another version: each side says so. A root drops a frame of another frame
// version (its log names it: "a peer of another actorcc version"); a joiner whose root greets
// with a frame it cannot read says that every rank and the root need the same version, at once.
TEST(BootstrapIdentity, APeerOfAnotherProtocolVersionIsNamedOnBothSides) {
  clear_run_ids();
  const UniqueId id = UniqueId::create("127.0.0.1");
  net::Fd old = raw_connect(id);
  uint8_t head[wire::kHeaderBytes] = {0x43, 0x54, 0x43, 0x41, 2, 0, 1, 0, 0, 0, 0, 0};  // a version-2 HELLO
  ASSERT_EQ(net::send_all(old.get(), head, sizeof head, in(milliseconds(1000))).status, net::IoStatus::Ok);
  EXPECT_TRUE(closed_within(old.get(), milliseconds(1000)));

  // A listener that greets with a frame of version 4, as a later actorcc's root might.
  net::Fd fake = net::listen_on(*net::resolve("127.0.0.1", 0));
  const uint16_t port = net::local_address(fake.get()).port();
  std::thread greeter([&] {
    pollfd p{fake.get(), POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return;
    net::Fd c(::accept4(fake.get(), nullptr, nullptr, SOCK_CLOEXEC));
    uint8_t v4[wire::kHeaderBytes] = {0x43, 0x54, 0x43, 0x41, 4, 0, 13, 0, 16, 0, 0, 0};
    net::send_all(c.get(), v4, sizeof v4, in(milliseconds(1000)));
    std::this_thread::sleep_for(milliseconds(500));
  });
  const UniqueId aid = address_unique_id("127.0.0.1", port, 2);
  const auto t0 = steady_clock::now();
  auto msg = expect_throw<RemoteError>([&] { join(aid, 1, 2, milliseconds(30000)); });
  greeter.join();
  EXPECT_TRUE(contains(msg, "frame version 4 is not supported (this build speaks 3)")) << msg;
  EXPECT_TRUE(contains(msg, "every rank and the root need the same actorcc version")) << msg;
  EXPECT_LT(steady_clock::now() - t0, milliseconds(3000));
}
