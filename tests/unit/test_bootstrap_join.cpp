// Bootstrap joins inside one process: ranks arriving in any order, the root's admission checks
// (token, duplicate rank, range, version, world), join deadlines on both sides, and a join that
// an abort or a dying rank ends.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
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

namespace {

// While a group of 2 forms, a bad join (after 200 ms) is refused with InvalidArgument naming each
// of `bad_hears`, and the good rank waiting for the group learns why at once (RemoteError naming
// each of `good_hears`, within 2 s), not at its join deadline.
void expect_rejected_while_forming(const std::function<void()>& bad_join, const std::vector<std::string>& bad_hears,
                                   const std::function<void()>& good_join, const std::vector<std::string>& good_hears,
                                   milliseconds within = milliseconds(2000)) {
  auto t0 = steady_clock::now();
  auto errs = run_ranks(2, [&](int r) {
    if (r == 1) {
      std::this_thread::sleep_for(milliseconds(200));
      auto msg = expect_throw<InvalidArgument>(bad_join);
      for (const auto& part : bad_hears) EXPECT_TRUE(contains(msg, part)) << msg;
      return;
    }
    auto msg = expect_throw<RemoteError>(good_join);
    for (const auto& part : good_hears) EXPECT_TRUE(contains(msg, part)) << msg;
  });
  expect_ok(errs);
  EXPECT_LT(steady_clock::now() - t0, within);
}

}  // namespace

TEST(Bootstrap, FourRanksJoinInRandomOrderAndGather) {
  UniqueId id = UniqueId::create("127.0.0.1");
  const int world = 4;
  std::vector<std::vector<std::string>> results(world);
  auto errs = run_ranks(world, [&](int r) {
    std::mt19937 rng(r * 7919 + 1);
    std::this_thread::sleep_for(milliseconds(rng() % 150));
    auto b = join(id, r, world);
    ASSERT_EQ(b->rank(), r);
    ASSERT_EQ(b->world(), world);
    ASSERT_EQ(b->peer_blobs().size(), 4u);
    for (int q = 0; q < world; ++q) EXPECT_EQ(b->peer_blobs()[q], "blob-" + std::to_string(q));
    for (int round = 0; round < 20; ++round) {
      std::this_thread::sleep_for(microseconds(rng() % 2000));
      auto got = b->allgather(std::to_string(round) + ":" + std::string(r * 10, 'a' + r), in(milliseconds(5000)));
      ASSERT_EQ(got.size(), 4u);
      for (int q = 0; q < world; ++q) EXPECT_EQ(got[q], std::to_string(round) + ":" + std::string(q * 10, 'a' + q));
      if (round == 19) results[r] = got;
      b->barrier(in(milliseconds(5000)));
    }
  });
  expect_ok(errs);
  for (int r = 1; r < world; ++r) EXPECT_EQ(results[r], results[0]);

  // Everyone left with BYE: the root stops and frees its port.
  auto root = bootstrap::read_id(id).root;
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    try {
      net::connect_with_retry(root, in(milliseconds(1)), nullptr, -1);
      std::this_thread::sleep_for(milliseconds(20));
    } catch (const TimeoutError&) {
      closed = true;
    }
  }
  EXPECT_TRUE(closed) << "the root still listens after every rank left";
}

// Outcomes: every rank sees the same verdict, with payloads and reasons (holding spaces or
// empty) intact and failures listed by class.
TEST(Bootstrap, OutcomesGiveEveryRankTheSameVerdict) {
  UniqueId id = UniqueId::create("127.0.0.1");
  const int world = 3;
  std::vector<std::string> verdicts(world);
  auto errs = run_ranks(world, [&](int r) {
    auto b = join(id, r, world);
    // Round 1: all ok, payloads with spaces and an empty one.
    auto o = Outcomes::gather(*b, "ok", r == 1 ? "" : "payload of " + std::to_string(r), in(milliseconds(5000)));
    EXPECT_TRUE(o.all_ok());
    EXPECT_EQ(o.world(), world);
    EXPECT_EQ(o.text(0), "payload of 0");
    EXPECT_EQ(o.text(1), "");
    EXPECT_EQ(o.text(2), "payload of 2");
    EXPECT_TRUE(o.ranks().empty());
    EXPECT_EQ(o.reasons(), "");
    // Round 2: rank 1 is a caller error ("bad"), rank 2 lacks a capability ("no").
    const std::string status = r == 1 ? "bad" : r == 2 ? "no" : "ok";
    o = Outcomes::gather(*b, status, r == 0 ? "h 1 2" : "why " + std::to_string(r), in(milliseconds(5000)));
    EXPECT_FALSE(o.all_ok());
    EXPECT_EQ(o.status(0), "ok");
    EXPECT_EQ(o.ranks(), (std::vector<int>{1, 2}));
    EXPECT_EQ(o.ranks("bad"), (std::vector<int>{1}));
    EXPECT_EQ(o.reasons("no"), "rank 2: why 2");
    verdicts[r] = o.reasons("", " | ");
    // Round 3: the error shorthand; an empty error is ok.
    o = Outcomes::gather_error(*b, r == 0 ? "broken" : "", in(milliseconds(5000)));
    EXPECT_EQ(o.ranks(), (std::vector<int>{0}));
    EXPECT_EQ(o.reasons(), "rank 0: broken");
    // Round 4: a result carries its payload when ok, only the error when not; an exception
    // whose message is empty still reads as a failure.
    struct Silent : std::exception {
      const char* what() const noexcept override { return ""; }
    };
    const std::string err = r == 2 ? Outcomes::reason(Silent{}) : "";
    o = Outcomes::gather_result(*b, err, "handle " + std::to_string(r), in(milliseconds(5000)));
    EXPECT_EQ(o.ranks(), (std::vector<int>{2}));
    EXPECT_EQ(o.text(0), "handle 0");
    EXPECT_EQ(o.reasons(), "rank 2: unknown error");
  });
  expect_ok(errs);
  for (int r = 0; r < world; ++r) EXPECT_EQ(verdicts[r], "rank 1: why 1 | rank 2: why 2");
}

TEST(Bootstrap, WrongTokenIsRejectedAndGroupCompletes) {
  UniqueId id = UniqueId::create("127.0.0.1");
  UniqueId forged = id;
  forged.bytes[30] ^= 0x5a;  // inside the token
  auto errs = run_ranks(3, [&](int r) {
    if (r == 2) {
      auto msg = expect_throw<InvalidArgument>([&] { join(forged, 1, 2); });
      EXPECT_TRUE(contains(msg, "wrong token")) << msg;
      return;
    }
    std::this_thread::sleep_for(milliseconds(100 * r));
    auto b = join(id, r, 2);
    b->barrier(in(milliseconds(5000)));
  });
  expect_ok(errs);
}

// A second rank 0 while the group forms: it is told why, and so is the real rank 0 (which
// would otherwise wait out the join deadline), at once.
TEST(Bootstrap, DuplicateRankIsRejected) {
  UniqueId id = UniqueId::create("127.0.0.1");
  expect_rejected_while_forming([&] { join(id, 0, 2); }, {"rank 0 already joined"},
                                [&] { join(id, 0, 2, milliseconds(30000)); },
                                {"rank 0 was rejected: rank 0 already joined"});
}

// Once the group is complete, a second claim of a rank still poisons it: which
// of the two processes belongs to the group cannot be known, so no rank may go on with data that
// could come from the wrong one. Every rank of the group and the claimant fail, naming the rank
// claimed twice and both claimants.
TEST(Bootstrap, DuplicateRankAfterTheGroupFormedPoisonsIt) {
  UniqueId id = UniqueId::create("127.0.0.1");
  std::string claimant;
  auto errs = run_ranks(2, [&](int r) {
    auto b = join(id, r, 2);
    b->barrier(in(milliseconds(5000)));
    if (r == 1) claimant = expect_throw<InvalidArgument>([&] { join(id, 1, 2); });
    auto msg = expect_throw<RemoteError>([&] { b->barrier(in(milliseconds(5000))); });
    EXPECT_TRUE(contains(msg, "rank 1 was rejected: rank 1 already joined from host")) << msg;
    EXPECT_TRUE(contains(msg, "a second join for it came from host")) << msg;
    EXPECT_TRUE(contains(msg, "rank 1 is claimed twice")) << msg;
  });
  expect_ok(errs);
  EXPECT_TRUE(contains(claimant, "rank 1 already joined from host")) << claimant;
  EXPECT_TRUE(contains(claimant, "pid " + std::to_string(::getpid()))) << claimant;
}

TEST(Bootstrap, RankOutOfRangeAndVersionMismatchAreRejected) {
  UniqueId id = UniqueId::create("127.0.0.1");
  // The client refuses locally...
  auto msg = expect_throw<InvalidArgument>([&] { join(id, 4, 4); });
  EXPECT_TRUE(contains(msg, "out of range")) << msg;
  // ...and the root refuses peers that do not.
  auto m = raw_exchange(id, hello_for(id, 4, 4));
  ASSERT_TRUE(std::holds_alternative<wire::Reject>(m));
  EXPECT_TRUE(contains(std::get<wire::Reject>(m).reason, "rank 4 is out of range")) << std::get<wire::Reject>(m).reason;
  m = raw_exchange(id, hello_for(id, -1, 4));
  ASSERT_TRUE(std::holds_alternative<wire::Reject>(m));
  auto h = hello_for(id, 0, 1);
  h.protocol_version = 99;
  m = raw_exchange(id, h);
  ASSERT_TRUE(std::holds_alternative<wire::Reject>(m));
  EXPECT_TRUE(contains(std::get<wire::Reject>(m).reason, "version 99")) << std::get<wire::Reject>(m).reason;
  // None of this disturbed the group.
  auto b = join(id, 0, 1);
  EXPECT_EQ(b->allgather("x", in(milliseconds(2000))), std::vector<std::string>{"x"});
}

// Rank 1 says world 3 in a group of 2: it is rejected, and rank 0, waiting for rank 1, learns
// why within a second instead of at its join deadline.
TEST(Bootstrap, WorldMismatchIsRejected) {
  UniqueId id = UniqueId::create("127.0.0.1");
  // One claim against one: the root waits kDisputeWait (2 s) for a third, then the size the ranks
  // that came could form (2: ranks 0 and 1) wins.
  expect_rejected_while_forming([&] { join(id, 1, 3); }, {"world size 3", "world size 2"},
                                [&] { join(id, 0, 2, milliseconds(30000)); },
                                {"rank 1 gave a world size other than", "rank 0 gave world size 2, rank 1 gave world size 3"},
                                milliseconds(3500));
  // A latecomer learns the same reason.
  auto late = expect_throw<RemoteError>([&] { join(id, 1, 2, milliseconds(3000)); });
  EXPECT_TRUE(contains(late, "rank 1 gave a world size other than")) << late;
}

// The first rank to arrive gives the wrong size. Before, it fixed the group's
// size and every rank blamed the first right rank to come after it. Now the root holds the
// disagreeing HELLO until a third claim breaks the tie, and every rank names rank 0.
TEST(Bootstrap, WrongWorldFromTheFirstRankToArriveIsBlamedOnIt) {
  UniqueId id = UniqueId::create("127.0.0.1");
  std::vector<int> culprits(4, -2);
  std::vector<std::string> msgs(4);
  auto t0 = steady_clock::now();
  auto errs = run_ranks(4, [&](int r) {
    if (r > 0) std::this_thread::sleep_for(milliseconds(150 * r));
    try {
      join(id, r, r == 0 ? 5 : 4, milliseconds(20000));
    } catch (const Error& e) {
      msgs[r] = e.what();
      culprits[r] = e.culprit();
    }
  });
  expect_ok(errs);
  EXPECT_LT(steady_clock::now() - t0, milliseconds(3000));
  EXPECT_EQ(culprits, (std::vector<int>{0, 0, 0, 0}));
  for (auto& m : msgs)
    EXPECT_TRUE(contains(m, "rank 0 gave a world size other than the most ranks' (4)")) << m;
}

TEST(Bootstrap, JoinTimeoutNamesMissingRank) {
  UniqueId id = UniqueId::create("127.0.0.1");
  auto t0 = steady_clock::now();
  std::vector<std::string> msgs(3);
  std::vector<int> culprits(3, -2);
  auto errs = run_ranks(3, [&](int r) {
    try {
      join(id, r, 4, milliseconds(1000));
    } catch (const TimeoutError& e) {
      msgs[r] = e.what();
      culprits[r] = e.culprit();
    }
  });
  expect_ok(errs);
  EXPECT_LT(steady_clock::now() - t0, milliseconds(2500));
  for (auto& m : msgs) EXPECT_TRUE(contains(m, "rank 3 of 4 did not join within 1 s")) << m;
  EXPECT_EQ(culprits, (std::vector<int>{3, 3, 3}));
}

TEST(Bootstrap, ConnectTimesOutWhenNoRootListens) {
  UniqueId id = address_unique_id("127.0.0.1", free_port(), 2);
  auto t0 = steady_clock::now();
  auto msg = expect_throw<TimeoutError>([&] { join(id, 1, 2, milliseconds(300)); });
  EXPECT_TRUE(contains(msg, "could not connect")) << msg;
  EXPECT_TRUE(contains(msg, "refused")) << msg;
  EXPECT_LT(steady_clock::now() - t0, milliseconds(1500));
}

TEST(Bootstrap, SilentRootTimesOutOnClientSide) {
  // Something listens but never answers (a hung root): the client's own deadline fires.
  net::Fd l = net::listen_on(net::SockAddr::any(AF_INET, 0));
  bootstrap::IdFields f;
  f.root = *net::resolve("127.0.0.1", net::local_address(l.get()).port());
  UniqueId id = bootstrap::make_id(f);
  auto msg = expect_throw<TimeoutError>([&] { join(id, 0, 2, milliseconds(200)); });
  EXPECT_TRUE(contains(msg, "did not answer")) << msg;
}

TEST(Bootstrap, FromAddressRank0StartsLate) {
  uint16_t port = free_port();
  const int world = 4;
  auto errs = run_ranks(world, [&](int r) {
    UniqueId id = address_unique_id("127.0.0.1", port, world);
    if (r == 0) {
      std::this_thread::sleep_for(milliseconds(300));  // the others are already retrying
      start_root_for(id);
      EXPECT_THROW(net::listen_on(bootstrap::read_id(id).root), SystemError);  // the port is taken now
    }
    auto b = join(id, r, world);
    auto got = b->allgather(std::to_string(r), in(milliseconds(5000)));
    EXPECT_EQ(got, (std::vector<std::string>{"0", "1", "2", "3"}));
  });
  expect_ok(errs);
}

TEST(Bootstrap, AbortDuringJoinWakesTheJoiner) {
  UniqueId id = UniqueId::create("127.0.0.1");
  auto sig = std::make_shared<AbortSignal>(0);
  std::thread raiser([&] {
    std::this_thread::sleep_for(milliseconds(100));
    sig->raise(-1, ErrorCode::Remote, "the caller gave up");
  });
  auto t0 = steady_clock::now();
  auto msg = expect_throw<RemoteError>([&] { join(id, 0, 2, milliseconds(10000), sig); });
  raiser.join();
  EXPECT_TRUE(contains(msg, "the caller gave up")) << msg;
  EXPECT_LT(steady_clock::now() - t0, milliseconds(1000));
}

TEST(Bootstrap, RankDyingBeforeTheGroupFormsFailsTheJoin) {
  UniqueId id = UniqueId::create("127.0.0.1");
  auto errs = run_ranks(2, [&](int r) {
    if (r == 1) {  // joins by hand, then its "process" dies
      wire::Token nonce{};
      net::Fd fd = raw_connect(id, &nonce);
      ASSERT_EQ(wire::send_message(fd.get(), signed_hello(hello_for(id, 1, 3), nonce), in(milliseconds(2000))).status,
                net::IoStatus::Ok);
      std::this_thread::sleep_for(milliseconds(200));
      return;
    }
    try {
      join(id, 0, 3, milliseconds(3000));  // the failed root lingers until this deadline
      ADD_FAILURE() << "join should fail";
    } catch (const RemoteError& e) {
      EXPECT_EQ(e.culprit(), 1);
      EXPECT_TRUE(contains(e.what(), "rank 1")) << e.what();
    }
  });
  expect_ok(errs);
  // Latecomers learn why instead of waiting out their deadline.
  auto t0 = steady_clock::now();
  auto msg = expect_throw<RemoteError>([&] { join(id, 2, 3); });
  EXPECT_TRUE(contains(msg, "rank 1")) << msg;
  EXPECT_LT(steady_clock::now() - t0, milliseconds(1000));
}
