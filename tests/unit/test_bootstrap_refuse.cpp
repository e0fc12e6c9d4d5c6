// A joiner's refusal (wire::Refuse, Bootstrap::refuse): a rank that finds a mistake of its own
// before it joins (a bad option, a rank out of range, no usable device) tells the root, and every
// rank waiting to join fails at once naming it and the mistake, instead of at its join deadline;
// a rank that comes later learns the same. The join timeouts here are long (60 s) so that only
// the refusal can end the waits within the bounds asserted.
#include "bootstrap_harness.hpp"

using namespace bootstrap_test;

namespace {

struct Outcome {
  std::string what;
  int culprit = -2;
};

// Ranks `ranks` of `world` join (60 s join timeout) while, 200 ms in, `refuse` runs; returns
// what each joiner raised and checks that all of it took less than `bound`.
std::vector<Outcome> join_while_refused(const UniqueId& id, const std::vector<int>& ranks, int world,
                                        const std::function<void()>& refuse, milliseconds bound = milliseconds(4000)) {
  std::vector<Outcome> out(ranks.size());
  const auto t0 = steady_clock::now();
  auto errs = run_ranks(static_cast<int>(ranks.size()) + 1, [&](int i) {
    if (i == static_cast<int>(ranks.size())) {
      std::this_thread::sleep_for(milliseconds(200));
      refuse();
      return;
    }
    try {
      join(id, ranks[i], world, milliseconds(60000));
      out[i].what = "joined";
    } catch (const RemoteError& e) {
      out[i] = {e.what(), e.culprit()};
    }
  });
  expect_ok(errs);
  EXPECT_LT(steady_clock::now() - t0, bound);
  return out;
}

}  // namespace

TEST(BootstrapRefuse, ARefusingRankFailsTheJoinOfEveryOtherAtOnceNamingIt) {
  UniqueId id = UniqueId::create("127.0.0.1");
  auto out = join_while_refused(id, {0, 1}, 3, [&] {
    Bootstrap::refuse(id, 2, 3, "unknown backend 'cpuu' (known: auto, cpu, cuda, gpu)", in(milliseconds(60000)));
  });
  for (const auto& o : out) {
    EXPECT_TRUE(contains(o.what, "rank 2 (host ")) << o.what;
    EXPECT_TRUE(contains(o.what, "refused to join: unknown backend 'cpuu'")) << o.what;
    EXPECT_EQ(o.culprit, 2) << o.what;
  }
  // A rank that comes later is told the same at once, not left to wait for rank 2.
  const auto t0 = steady_clock::now();
  auto late = expect_throw<RemoteError>([&] { join(id, 0, 3, milliseconds(60000)); });
  EXPECT_TRUE(contains(late, "rank 2 (host ") && contains(late, "refused to join")) << late;
  EXPECT_LT(steady_clock::now() - t0, milliseconds(2000));
}

// Rank 4 of 4 names no rank of the group: the root names the joiner by what it claimed, and no
// rank of the group is the culprit.
TEST(BootstrapRefuse, AClaimOutOfRangeIsNamedByWhatItClaimed) {
  UniqueId id = UniqueId::create("127.0.0.1");
  auto out = join_while_refused(id, {0, 1, 2}, 4, [&] {
    Bootstrap::refuse(id, 4, 4, "rank 4 is outside the group of 4", in(milliseconds(60000)));
  });
  for (const auto& o : out) {
    EXPECT_TRUE(contains(o.what, "a joiner claiming rank 4 of world 4 (host ")) << o.what;
    EXPECT_TRUE(contains(o.what, " pid ")) << o.what;
    EXPECT_TRUE(contains(o.what, "refused to join: rank 4 is outside the group of 4")) << o.what;
    EXPECT_EQ(o.culprit, -1) << o.what;
  }
}

// A world size other than the group's is a claim the group cannot hold either.
TEST(BootstrapRefuse, AClaimOfAnotherWorldSizeNamesBoth) {
  UniqueId id = UniqueId::create("127.0.0.1");
  auto out = join_while_refused(id, {0, 1}, 3, [&] {
    Bootstrap::refuse(id, 2, 5, "no CUDA device is usable here", in(milliseconds(60000)));
  });
  for (const auto& o : out) {
    EXPECT_TRUE(contains(o.what, "a joiner claiming rank 2 of world 5 (host ")) << o.what;
    EXPECT_EQ(o.culprit, -1) << o.what;
  }
}

// The refusal may come before any rank: those that come later fail at once.
TEST(BootstrapRefuse, ARefusalBeforeAnyRankArrivedFailsEveryLaterJoin) {
  UniqueId id = UniqueId::create("127.0.0.1");
  Bootstrap::refuse(id, 1, 2, "a bad option", in(milliseconds(60000)));
  const auto t0 = steady_clock::now();
  auto msg = expect_throw<RemoteError>([&] { join(id, 0, 2, milliseconds(60000)); });
  EXPECT_TRUE(contains(msg, "rank 1 (host ") && contains(msg, "refused to join: a bad option")) << msg;
  EXPECT_LT(steady_clock::now() - t0, milliseconds(2000));
}

// A refusal is authenticated as a HELLO is: one without the group's token changes nothing, and
// one after the group formed does not disturb it.
TEST(BootstrapRefuse, AStrangersOrALateRefusalLeavesTheGroupAlone) {
  UniqueId id = UniqueId::create("127.0.0.1");
  {
    wire::Token nonce{};
    net::Fd fd = raw_connect(id, &nonce);
    wire::Hello h = hello_for(id, 1, 2);
    h.mac[0] ^= 1;  // signed with a key other than the group's token
    wire::Refuse r{signed_hello(h, nonce), "not one of them"};
    ASSERT_EQ(wire::send_message(fd.get(), r, in(milliseconds(2000))).status, net::IoStatus::Ok);
    auto got = wire::recv_message(fd.get(), in(milliseconds(2000)));
    ASSERT_TRUE(got.msg && std::holds_alternative<wire::Reject>(*got.msg));
    EXPECT_TRUE(contains(std::get<wire::Reject>(*got.msg).reason, "wrong token"));
  }
  std::vector<std::unique_ptr<Bootstrap>> bs(2);
  expect_ok(run_ranks(2, [&](int r) { bs[r] = join(id, r, 2); }));
  Bootstrap::refuse(id, 1, 2, "too late", in(milliseconds(60000)));
  std::vector<std::vector<std::string>> got(2);
  expect_ok(run_ranks(2, [&](int r) { got[r] = bs[r]->allgather(std::to_string(r), in(milliseconds(3000))); }));
  EXPECT_EQ(got[0], (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(got[1], got[0]);
}

// Nothing to tell where the id cannot be read or its root is gone: bounded and silent.
TEST(BootstrapRefuse, AnUnreachableRootIsGivenUpWithinSeconds) {
  UniqueId bad;  // all zero: no address in it
  Bootstrap::refuse(bad, 0, 2, "x", in(milliseconds(60000)));
  bootstrap::IdFields f;
  f.root = *net::resolve("127.0.0.1", free_port());
  f.token = bootstrap::random_token();
  const auto t0 = steady_clock::now();
  Bootstrap::refuse(bootstrap::make_id(f), 0, 2, "x", in(milliseconds(60000)));
  EXPECT_LT(steady_clock::now() - t0, milliseconds(4500));
}
