// Sub-groups (backends/hier/sub_group.hpp) inside one process: threads play the ranks of a group over
// loopback, each forms the sub-group of its "node", and the sub-groups' bootstrap views gather
// among their members only, renumber ranks and map them back.
#include <gtest/gtest.h>

#include <barrier>
#include <functional>
#include <thread>

#include "actorcc/error.hpp"
#include "actorcc/unique_id.hpp"
#include "backends/hier/sub_group.hpp"

using namespace actorcc;
using namespace std::chrono;

namespace {

// Runs fn(ctx) on `world` threads, each a rank of one group joined over loopback (its own
// bootstrap and abort signal); returns what each threw ("" when nothing).
std::vector<std::string> run_group(int world, milliseconds timeout, const std::function<void(GroupContext&)>& fn) {
  const UniqueId id = UniqueId::create("127.0.0.1");
  std::vector<std::string> err(world);
  std::barrier sync(world);
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      auto abort = std::make_shared<AbortSignal>(r);
      std::unique_ptr<Bootstrap> bs;
      try {
        bs = Bootstrap::join(id, r, world, "blob" + std::to_string(r), Deadline::after(seconds(10)), abort);
        GroupContext ctx;
        ctx.rank = r;
        ctx.world = world;
        ctx.options.join_timeout = seconds(10);
        ctx.options.timeout = timeout;
        for (int q = 0; q < world; ++q) {
          PeerInfo p;
          p.rank = q;
          p.host_id = "host" + std::to_string(q % 2);
          p.pid = 1000 + q;
          ctx.peers.push_back(p);
        }
        ctx.group_tag = "t";
        ctx.id = id;
        ctx.bootstrap = bs.get();
        ctx.abort = abort;
        fn(ctx);
      } catch (const std::exception& e) {
        err[r] = e.what();
      }
      sync.arrive_and_wait();  // nobody leaves while a peer may still talk to it
    });
  for (auto& t : ts) t.join();
  return err;
}

std::vector<int> same_parity(int r, int world) {
  std::vector<int> m;
  for (int q = r % 2; q < world; q += 2) m.push_back(q);
  return m;
}

}  // namespace

TEST(SubGroup, GathersAmongItsMembersOnlyAndRenumbers) {
  const int world = 6;
  auto err = run_group(world, seconds(10), [&](GroupContext& ctx) {
    const auto members = same_parity(ctx.rank, world);  // {0, 2, 4} and {1, 3, 5}
    auto sg = make_sub_group(ctx, members, "-n" + std::to_string(ctx.rank % 2));
    GroupContext& c = sg->ctx;
    EXPECT_EQ(c.world, 3);
    EXPECT_EQ(c.rank, ctx.rank / 2);
    EXPECT_EQ(c.members, members);
    for (int i = 0; i < c.world; ++i) {
      EXPECT_EQ(c.global_rank(i), members[i]);
      EXPECT_EQ(c.peers[i].rank, i);
      EXPECT_EQ(c.peers[i].pid, 1000 + members[i]);
    }
    EXPECT_EQ(c.num_nodes, 1);
    EXPECT_EQ(c.local_ranks, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(c.local_index, c.rank);
    EXPECT_EQ(c.group_tag, "t-n" + std::to_string(ctx.rank % 2));
    EXPECT_EQ(c.bootstrap->peer_blobs()[1], "blob" + std::to_string(members[1]));
    // Several rounds, with sizes that differ per member (and an empty blob).
    for (int round = 0; round < 5; ++round) {
      std::string mine(static_cast<size_t>(ctx.rank * 1000 * round), static_cast<char>('a' + ctx.rank));
      auto all = c.bootstrap->allgather(mine, Deadline::after(seconds(10)));
      ASSERT_EQ(all.size(), 3u);
      for (int i = 0; i < 3; ++i)
        EXPECT_EQ(all[i], std::string(static_cast<size_t>(members[i] * 1000 * round), static_cast<char>('a' + members[i])));
    }
    c.bootstrap->barrier(Deadline::after(seconds(10)));
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(err[r], "") << "rank " << r;
}

TEST(SubGroup, AMemberThatNeverGathersIsNamedWithinTheDeadline) {
  const int world = 4;
  auto err = run_group(world, seconds(10), [&](GroupContext& ctx) {
    auto sg = make_sub_group(ctx, same_parity(ctx.rank, world), "-n");
    if (ctx.rank == 3) {  // in the sub-group but never gathers; its partner, rank 1, waits for it
      std::this_thread::sleep_for(milliseconds(1500));
      return;
    }
    const auto t0 = steady_clock::now();
    try {
      sg->ctx.bootstrap->allgather("x", Deadline::after(milliseconds(500)));
    } catch (const TimeoutError&) {
      EXPECT_GE(steady_clock::now() - t0, milliseconds(450));
      EXPECT_LT(steady_clock::now() - t0, seconds(5));
      throw;
    }
  });
  EXPECT_EQ(err[0], "");
  EXPECT_EQ(err[2], "");  // the other sub-group never waits for this one
  EXPECT_NE(err[1].find("rank 3"), std::string::npos) << err[1];
  EXPECT_EQ(err[3], "");
}

TEST(SubGroup, AbortingTheViewAbortsTheWholeGroup) {
  const int world = 4;
  auto err = run_group(world, seconds(10), [&](GroupContext& ctx) {
    auto sg = make_sub_group(ctx, same_parity(ctx.rank, world), "-n");
    ctx.bootstrap->barrier(Deadline::after(seconds(10)));  // every sub-group is up (an abort during setup is another case)
    if (ctx.rank == 2) sg->ctx.bootstrap->abort("node step failed on purpose");
    // Everyone, in either sub-group, learns it through the whole group's bootstrap.
    const auto t0 = steady_clock::now();
    while (!ctx.abort->raised() && steady_clock::now() - t0 < seconds(5)) std::this_thread::sleep_for(milliseconds(5));
    EXPECT_TRUE(ctx.abort->raised()) << "rank " << ctx.rank;
    EXPECT_NE(ctx.abort->reason().find("on purpose"), std::string::npos) << ctx.abort->reason();
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(err[r], "") << "rank " << r;
}
