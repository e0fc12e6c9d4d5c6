// The root against strangers and abuse (an authenticated, bounded root): oversized
// frames before HELLO, floods of unauthenticated connections, huge worlds, a missing secret,
// running out of descriptors, oversized allgathers, infinite deadlines, unused roots.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <variant>
#include <functional>
#include <limits>
#include <random>
#include <thread>

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actorcc/error.hpp"
#include "actorcc/options.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/client.hpp"
#include "bootstrap/frame_io.hpp"
#include "bootstrap/id_fields.hpp"
#include "bootstrap/outcomes.hpp"
#include "bootstrap/root.hpp"
#include "bootstrap_harness.hpp"

using namespace bootstrap_test;

TEST(Bootstrap, GarbageAndSilentConnectionsDoNotDisturbTheGroup) {
  UniqueId id = UniqueId::create("127.0.0.1");
  net::Fd junk = raw_connect(id);
  const char http[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(net::send_all(junk.get(), http, sizeof(http) - 1, in(milliseconds(1000))).status, net::IoStatus::Ok);
  char c;
  // The root drops it: EOF (or reset), well before our bound.
  EXPECT_EQ(net::recv_all(junk.get(), &c, 1, in(milliseconds(2000))).status, net::IoStatus::Closed);
  net::Fd silent = raw_connect(id);  // says nothing; dropped after a few seconds, meanwhile harmless
  auto errs = run_ranks(2, [&](int r) {
    auto b = join(id, r, 2);
    b->barrier(in(milliseconds(5000)));
  });
  expect_ok(errs);
}

// Item 1: a stranger cannot make the root buffer a big frame before it authenticates; the root
// drops it as soon as the header announces more than a HELLO can be.
TEST(BootstrapLimits, OversizedFrameBeforeHelloIsDroppedAtOnce) {
  UniqueId id = UniqueId::create("127.0.0.1");
  net::Fd big = raw_connect(id);
  send_header(big.get(), wire::MsgType::Hello, wire::kMaxHelloPayload + 1);
  EXPECT_TRUE(closed_within(big.get(), milliseconds(1000)));
  // A HELLO-sized one is still read: rank 0 is admitted and waits for rank 1 (no answer yet).
  wire::Token nonce{};
  net::Fd ok = raw_connect(id, &nonce);
  wire::Hello h = hello_for(id, 0, 2);
  h.blob.assign(wire::kMaxHelloPayload / 2, 'x');
  ASSERT_EQ(wire::send_message(ok.get(), signed_hello(h, nonce), in(milliseconds(2000))).status, net::IoStatus::Ok);
  auto got = wire::recv_message(ok.get(), in(milliseconds(300)));
  EXPECT_EQ(got.io.status, net::IoStatus::Timeout);
}

// Item 1: connections that never authenticate are capped; beyond the cap the root closes new
// ones at once, its descriptors stay bounded, and the real group still forms.
TEST(BootstrapLimits, ManyStrangersAreCappedAndTheGroupStillForms) {
  UniqueId id = UniqueId::create("127.0.0.1");
  const int before = open_fds();
  std::vector<net::Fd> strangers;
  for (int i = 0; i < 200; ++i) strangers.push_back(raw_connect(id));
  std::this_thread::sleep_for(milliseconds(300));
  int closed = 0;
  for (auto& s : strangers) closed += closed_within(s.get(), milliseconds(5)) ? 1 : 0;
  EXPECT_GE(closed, 200 - 64 - 8) << "the root kept too many unauthenticated connections";
  // The strangers keep coming while the ranks join: each new one evicts the oldest.
  // Our 200 ends + the root's accepted ends: bounded by the cap, not by the strangers.
  EXPECT_LE(open_fds() - before, 200 + 64 + 8);
  std::atomic<bool> done{false};
  std::thread flood([&] {
    while (!done.load()) {
      try {
        strangers.push_back(raw_connect(id));
      } catch (const TimeoutError&) {
        break;  // the root has finished: the group formed and left
      }
      if (strangers.size() > 400) strangers.erase(strangers.begin(), strangers.begin() + 100);
      std::this_thread::sleep_for(milliseconds(1));
    }
  });
  auto errs = run_ranks(3, [&](int r) {
    auto b = join(id, r, 3);
    b->barrier(in(milliseconds(5000)));
  });
  done = true;
  flood.join();
  expect_ok(errs);
}

// Item 3: a HELLO's world is checked before anything is sized by it: against the id on the
// from_address path, and against a cap otherwise; the real ranks are not disturbed.
TEST(BootstrapLimits, HugeOrWrongWorldIsRejectedBeforeAllocation) {
  UniqueId id = UniqueId::create("127.0.0.1");
  auto m = raw_exchange(id, hello_for(id, 0, 10'000'000));
  ASSERT_TRUE(std::holds_alternative<wire::Reject>(m));
  EXPECT_TRUE(contains(std::get<wire::Reject>(m).reason, "not in 1..65536")) << std::get<wire::Reject>(m).reason;
  auto errs = run_ranks(2, [&](int r) { join(id, r, 2)->barrier(in(milliseconds(5000))); });
  expect_ok(errs);

  const uint16_t port = free_port();
  UniqueId aid = address_unique_id("127.0.0.1", port, 2);
  start_root_for(aid);
  m = raw_exchange(aid, hello_for(aid, 0, 5));  // right token, wrong world, first to arrive
  ASSERT_TRUE(std::holds_alternative<wire::Reject>(m));
  EXPECT_TRUE(contains(std::get<wire::Reject>(m).reason, "says world size 5 but the group's id was made for world size 2"))
      << std::get<wire::Reject>(m).reason;
  errs = run_ranks(2, [&](int r) { join(aid, r, 2)->barrier(in(milliseconds(5000))); });
  expect_ok(errs);
}

// Item 2: with a secret, someone who computes the token from host, port and world alone (what
// the old token was) is refused, and the group forms with the real ranks.
TEST(BootstrapLimits, FromAddressStrangerWithoutTheSecretIsRefused) {
  const uint16_t port = free_port();
  UniqueId guessed = address_unique_id("127.0.0.1", port, 2);  // what a stranger can compute
  ::setenv("ACTORCC_BOOTSTRAP_SECRET", "a-secret-only-the-launcher-knows", 1);
  UniqueId real = address_unique_id("127.0.0.1", port, 2);
  ::unsetenv("ACTORCC_BOOTSTRAP_SECRET");
  start_root_for(real);
  auto msg = expect_throw<InvalidArgument>([&] { join(guessed, 1, 2, milliseconds(3000)); });
  EXPECT_TRUE(contains(msg, "wrong token")) << msg;
  auto errs = run_ranks(2, [&](int r) {
    auto b = join(real, r, 2);
    EXPECT_EQ(b->peer_blobs()[1], "blob-1");  // the real rank 1, not the stranger
  });
  expect_ok(errs);
}

// Item 2: the root listens on exactly the address asked for, not on every interface.
TEST(BootstrapLimits, RootListensOnlyOnTheAddressAskedFor) {
  auto other = net::first_non_loopback_ipv4();
  if (!other) GTEST_SKIP() << "this host has no non-loopback IPv4 address";
  UniqueId id = UniqueId::create("127.0.0.1");
  auto addr = *net::resolve(*other, bootstrap::read_id(id).root.port());
  EXPECT_THROW(net::connect_with_retry(addr, in(milliseconds(200)), nullptr, -1), TimeoutError);
  const uint16_t port = free_port();
  UniqueId aid = address_unique_id("127.0.0.1", port, 1);
  start_root_for(aid);
  EXPECT_THROW(net::connect_with_retry(*net::resolve(*other, port), in(milliseconds(200)), nullptr, -1), TimeoutError);
  join(aid, 0, 1);
}

// Item 5: out of descriptors, the root backs off instead of spinning on a readable listener.
TEST(BootstrapLimits, AcceptFailureBacksOffInsteadOfSpinning) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: leave room for the root and a few connections, then exhaust descriptors.
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = static_cast<rlim_t>(open_fds() + 24);
    ::setrlimit(RLIMIT_NOFILE, &rl);
    UniqueId id = UniqueId::create("127.0.0.1");
    auto addr = bootstrap::read_id(id).root;
    std::vector<int> held;
    for (;;) {  // connect until socket() fails: the rest of the backlog cannot be accepted
      int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (s < 0) break;
      ::connect(s, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len);
      held.push_back(s);
    }
    std::this_thread::sleep_for(milliseconds(200));
    rusage a{}, b{};
    ::getrusage(RUSAGE_SELF, &a);
    std::this_thread::sleep_for(milliseconds(1500));
    ::getrusage(RUSAGE_SELF, &b);
    auto cpu_us = [](const rusage& u) {
      return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000L + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
    };
    long used = cpu_us(b) - cpu_us(a);
    std::fprintf(stderr, "root CPU over 1.5 s while out of fds: %ld us\n", used);
    ::_exit(used < 300000 ? 0 : 1);  // spinning costs ~1.5 s of CPU here
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "the root spun on the listener while out of descriptors";
}

// Item 5, the log: a flood of strangers (here 40 HELLOs with a wrong token, each rejected)
// writes at most 5 lines about them per 10 s window, not one each; the group still forms.
TEST(BootstrapLimits, StrangerLinesAreRateLimited) {
  UniqueId id = UniqueId::create("127.0.0.1");
  std::FILE* captured = std::tmpfile();
  ASSERT_NE(captured, nullptr);
  std::fflush(stderr);
  const int saved = ::dup(2);
  ::dup2(::fileno(captured), 2);
  int rejected = 0;
  for (int i = 0; i < 40; ++i) {
    wire::Hello h = hello_for(id, 0, 2);
    h.mac[0] ^= 0x5a;  // signed with a key one byte off the token
    rejected += std::holds_alternative<wire::Reject>(raw_exchange(id, h)) ? 1 : 0;
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::rewind(captured);
  int lines = 0;
  for (char buf[4096]; std::fgets(buf, sizeof buf, captured);) lines += contains(buf, "wrong token") ? 1 : 0;
  std::fclose(captured);
  EXPECT_EQ(rejected, 40);
  EXPECT_GE(lines, 1) << "the first stranger must be logged";
  EXPECT_LE(lines, 5) << "one log line per stranger: the log is not rate-limited";
  expect_ok(run_ranks(2, [&](int r) { join(id, r, 2)->barrier(in(milliseconds(5000))); }));
}

// Item 12: a blob beyond its share of the frame bound is refused on the caller before anything
// is sent, without taking a sequence number: the next allgather of every rank still matches.
TEST(BootstrapLimits, OversizedAllgatherFailsOnTheCallerAndTheGroupStaysUsable) {
  UniqueId id = UniqueId::create("127.0.0.1");
  const int world = 2;
  ASSERT_LT(allgather_limit(world), wire::kMaxPayload / world);
  auto errs = run_ranks(world, [&](int r) {
    auto b = join(id, r, world);
    if (r == 1) {
      std::string big(allgather_limit(world) + 1, 'x');
      auto msg = expect_throw<InvalidArgument>([&] { b->allgather(big, in(milliseconds(5000))); });
      EXPECT_TRUE(contains(msg, "rank 1: allgather blob of")) << msg;
      EXPECT_TRUE(contains(msg, "above the limit")) << msg;
    }
    auto got = b->allgather("after-" + std::to_string(r), in(milliseconds(5000)));
    EXPECT_EQ(got, (std::vector<std::string>{"after-0", "after-1"}));
  });
  expect_ok(errs);
}

// Item 11: an infinite timeout is a never-deadline (no overflow), and waits under it still end
// when the group aborts.
TEST(BootstrapLimits, InfiniteDeadlineIsNeverAndStillAbortable) {
  Deadline d = Deadline::after(milliseconds::max());
  EXPECT_TRUE(d.is_never());
  EXPECT_FALSE(d.expired());
  EXPECT_TRUE(Deadline::after(hours(24 * 365 * 1000)).when() > Clock::now());
  EXPECT_TRUE(Deadline::after(milliseconds(0)).expired());
  UniqueId id = UniqueId::create("127.0.0.1");
  auto t0 = steady_clock::now();
  auto errs = run_ranks(2, [&](int r) {
    auto b = join(id, r, 2, milliseconds::max());
    b->barrier(Deadline::after(milliseconds::max()));
    if (r == 0) {
      std::this_thread::sleep_for(milliseconds(200));
      b->abort("stop waiting");
    } else {
      expect_throw<Error>([&] { b->barrier(Deadline::after(milliseconds::max())); });
    }
  });
  expect_ok(errs);
  EXPECT_LT(steady_clock::now() - t0, milliseconds(3000));
}

TEST(BootstrapLimits, TimeoutSecondsConversion) {
  EXPECT_EQ(timeout_from_seconds(std::numeric_limits<double>::infinity(), "t"), milliseconds::max());
  EXPECT_EQ(timeout_from_seconds(1e300, "t"), milliseconds::max());
  EXPECT_EQ(timeout_from_seconds(1e-4, "t"), milliseconds(1));  // rounds up, never to 0
  EXPECT_EQ(timeout_from_seconds(2.5, "t"), milliseconds(2500));
  EXPECT_THROW(timeout_from_seconds(0, "t"), InvalidArgument);
  EXPECT_THROW(timeout_from_seconds(-1, "t"), InvalidArgument);
  EXPECT_THROW(timeout_from_seconds(std::nan(""), "t"), InvalidArgument);
  ::setenv("ACTORCC_TIMEOUT_S", "inf", 1);
  EXPECT_EQ(options_from_env().timeout, milliseconds::max());
  ::setenv("ACTORCC_TIMEOUT_S", "0", 1);
  EXPECT_THROW(options_from_env(), InvalidArgument);
  ::unsetenv("ACTORCC_TIMEOUT_S");
}

// Item 14: an id nobody joined can stop its root: thread, port and descriptors go.
TEST(BootstrapLimits, UnusedRootStopsAndFreesItsDescriptors) {
  const int before = open_fds();
  std::vector<UniqueId> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(UniqueId::create("127.0.0.1"));
  EXPECT_GE(open_fds() - before, 20);
  for (auto& id : ids) EXPECT_TRUE(id.stop_root_if_unused());
  EXPECT_LE(open_fds() - before, 0);
  auto addr = bootstrap::read_id(ids[0]).root;
  EXPECT_THROW(net::connect_with_retry(addr, in(milliseconds(100)), nullptr, -1), TimeoutError);
  // In use: not stopped.
  UniqueId used = UniqueId::create("127.0.0.1");
  auto b = join(used, 0, 1);
  EXPECT_FALSE(used.stop_root_if_unused());
  b->barrier(in(milliseconds(2000)));
}

namespace {
long rss_mib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  std::fclose(f);
  return kib / 1024;
}
// Sanitizers make RSS say nothing: ASan's quarantine keeps freed blocks resident, TSan's shadow
// memory grows with what the process touched. The RSS bounds are checked in plain builds only.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif
}  // namespace

// An authenticated connection sends 16 allgathers of 60 MiB ahead of its peer
// (before: the root held all of them, RSS +960 MiB, and kept them after both left). Now the
// root holds at most 64 MiB of one rank's blobs ahead of the group: the second frame is refused,
// the group fails naming that rank on every rank, and what the root held is freed at once.
TEST(BootstrapLimits, RankRunningAheadIsRefusedNamedAndWhatTheRootHeldIsFreed) {
  UniqueId id = UniqueId::create("127.0.0.1");
  auto sig1 = std::make_shared<AbortSignal>(1);
  std::unique_ptr<Bootstrap> b1;
  std::thread t([&] { b1 = join(id, 1, 2, milliseconds(10000), sig1); });
  wire::Token nonce{};
  net::Fd raw = raw_connect(id, &nonce);
  ASSERT_EQ(wire::send_message(raw.get(), signed_hello(hello_for(id, 0, 2), nonce), in(milliseconds(2000))).status,
            net::IoStatus::Ok);
  auto w = wire::recv_message(raw.get(), in(milliseconds(5000)));
  t.join();
  ASSERT_TRUE(w.msg && std::holds_alternative<wire::Welcome>(*w.msg));
  ASSERT_TRUE(b1);

  const std::string blob(60u << 20, 'x');
  const long base = rss_mib();
  long peak = base;
  int sent = 0;
  for (uint64_t seq = 0; seq < 16; ++seq) {
    if (wire::send_message(raw.get(), wire::Allgather{seq, blob}, in(milliseconds(5000))).status != net::IoStatus::Ok)
      break;
    ++sent;
    peak = std::max(peak, rss_mib());
  }
  // Rank 1 (which never ran ahead) learns within a second, naming rank 0 and the bound.
  ASSERT_TRUE(sig1->wait_until(in(milliseconds(5000))));
  EXPECT_EQ(sig1->culprit(), 0);
  EXPECT_TRUE(contains(sig1->reason(), "rank 0 was refused")) << sig1->reason();
  EXPECT_TRUE(contains(sig1->reason(), "above the bound of 64 MiB")) << sig1->reason();
  std::this_thread::sleep_for(milliseconds(300));
  peak = std::max(peak, rss_mib());
  b1.reset();
  raw.reset();
  // The root ends with the group (nobody connected) and frees everything it held.
  long after = rss_mib();
  for (int i = 0; i < 40 && after - base > 64; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    after = rss_mib();
  }
  std::printf("run-ahead: %d of 16 frames of 60 MiB sent; RSS %ld MiB before, peak +%ld MiB, +%ld MiB after\n", sent,
              base, peak - base, after - base);
  if (kAsan) return;
  EXPECT_LT(peak - base, 320) << "the root held more than the bound";
  EXPECT_LT(after - base, 64) << "the root kept what it held after the group ended";
}
