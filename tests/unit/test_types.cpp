// Public value types: names, sizes, parsers, option overrides from the environment.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <functional>
#include <vector>

#include "actorcc/actorcc.hpp"
#include "core/validate.hpp"
#include "group/call_desc.hpp"

using namespace actorcc;

namespace {

// validate_args on rank 1 of `world` throws InvalidArgument whose text names `needle` and the rank.
void expect_invalid_on_rank1(const CollArgs& x, int world, const char* needle) {
  try {
    validate_args(x, 1, world);
    ADD_FAILURE() << "no error for " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Types, DtypeSizesAndNamesRoundTrip) {
  size_t want[] = {4, 2, 2, 8, 1, 1, 4, 8};
  for (int i = 0; i < kNumDataTypes; ++i) {
    auto t = static_cast<DataType>(i);
    EXPECT_EQ(dtype_size(t), want[i]);
    EXPECT_EQ(parse_dtype(to_string(t)), t);
  }
  EXPECT_EQ(parse_dtype("bf16"), DataType::BFloat16);
  EXPECT_EQ(parse_dtype("HALF"), DataType::Float16);
  EXPECT_THROW(parse_dtype("float8"), InvalidArgument);
}

TEST(Types, OpsAndCollectivesParse) {
  for (int i = 0; i < kNumRedOps; ++i) EXPECT_EQ(parse_redop(to_string(static_cast<RedOp>(i))), static_cast<RedOp>(i));
  EXPECT_EQ(parse_collective("allreduce"), Collective::AllReduce);
  EXPECT_EQ(parse_collective("all_gather"), Collective::AllGather);
  EXPECT_THROW(parse_redop("xor"), InvalidArgument);
  EXPECT_THROW(parse_backend("tpu"), InvalidArgument);
}

TEST(Options, EnvironmentOverridesOnlyDefaults) {
  setenv("ACTORCC_TIMEOUT_S", "2.5", 1);
  setenv("ACTORCC_ALGO", "oneshot", 1);
  Options o = options_from_env();
  EXPECT_EQ(o.timeout.count(), 2500);
  EXPECT_EQ(o.algo, "oneshot");
  Options mine;
  mine.timeout = std::chrono::milliseconds(700);
  mine.algo = "twoshot";
  o = options_from_env(mine);
  EXPECT_EQ(o.timeout.count(), 700);
  EXPECT_EQ(o.algo, "twoshot");
  setenv("ACTORCC_TIMEOUT_S", "soon", 1);
  EXPECT_THROW(options_from_env(), InvalidArgument);
  unsetenv("ACTORCC_TIMEOUT_S");
  unsetenv("ACTORCC_ALGO");
}

TEST(Validate, RejectsBadArgumentsNamingThem) {
  float a[4], b[4];
  CollArgs ok{Collective::AllReduce, a, b, 4, DataType::Float32, RedOp::Sum, 0, nullptr};
  EXPECT_NO_THROW(validate_args(ok, 0, 2));
  auto expect_bad = [](const CollArgs& x, const char* needle) { expect_invalid_on_rank1(x, 2, needle); };
  CollArgs x = ok;
  x.send = nullptr;
  expect_bad(x, "send buffer is null");
  x = ok;
  x.recv = nullptr;
  expect_bad(x, "recv buffer is null");
  x = ok;
  x.coll = Collective::Broadcast;
  x.root = 2;
  expect_bad(x, "root 2");
  x = ok;
  x.dtype = static_cast<DataType>(42);
  expect_bad(x, "unsupported dtype");
  x = ok;
  x.op = static_cast<RedOp>(9);
  expect_bad(x, "unsupported op");
  x = ok;
  x.coll = Collective::AllGather;
  x.count = SIZE_MAX / 4;
  expect_bad(x, "overflows");
  x = ok;
  x.recv = reinterpret_cast<char*>(b) + 1;
  expect_bad(x, "aligned");
  // count 0 needs no buffers; a non-root broadcast needs no send buffer.
  x = ok;
  x.count = 0;
  x.send = x.recv = nullptr;
  EXPECT_NO_THROW(validate_args(x, 1, 2));
  x = ok;
  x.coll = Collective::Broadcast;
  x.send = nullptr;
  EXPECT_NO_THROW(validate_args(x, 1, 2));
}

TEST(Validate, PointToPointAndRootedCallsNameWhatIsWrong) {
  float a[8], b[8];
  auto expect_bad = [](const CollArgs& x, const char* needle) { expect_invalid_on_rank1(x, 3, needle); };
  CollArgs send{Collective::Send, a, nullptr, 8, DataType::Float32, RedOp::Sum, 0, nullptr};
  send.peer = 2;
  EXPECT_NO_THROW(validate_args(send, 1, 3));
  CollArgs x = send;
  x.peer = 3;
  expect_bad(x, "peer 3");
  x.peer = 1;
  expect_bad(x, "this rank itself");
  x = send;
  x.send = nullptr;
  expect_bad(x, "send buffer is null");
  CollArgs recv{Collective::Recv, nullptr, b, 8, DataType::Float32, RedOp::Sum, 0, nullptr};
  recv.peer = 0;
  EXPECT_NO_THROW(validate_args(recv, 1, 3));
  // Roots: in range; the buffers only the root uses may be null elsewhere.
  CollArgs g{Collective::Gather, a, nullptr, 2, DataType::Float32, RedOp::Sum, 0, nullptr};
  EXPECT_NO_THROW(validate_args(g, 1, 3));
  g.root = 1;
  expect_bad(g, "recv buffer is null");
  g.root = -1;
  expect_bad(g, "root -1");
  CollArgs sc{Collective::Scatter, nullptr, b, 2, DataType::Float32, RedOp::Sum, 0, nullptr};
  EXPECT_NO_THROW(validate_args(sc, 1, 3));
  CollArgs red{Collective::Reduce, a, nullptr, 8, DataType::Float32, static_cast<RedOp>(7), 0, nullptr};
  expect_bad(red, "unsupported op");
  red.op = RedOp::Max;
  EXPECT_NO_THROW(validate_args(red, 1, 3));
  // all_to_all: world x count overflow, overlap.
  CollArgs aa{Collective::AllToAll, a, b, 2, DataType::Float32, RedOp::Sum, 0, nullptr};
  EXPECT_NO_THROW(validate_args(aa, 1, 3));
  aa.count = SIZE_MAX / 8;
  expect_bad(aa, "overflows");
  aa.count = 2;
  aa.recv = a + 1;
  expect_bad(aa, "overlap");
  // all_to_all_v: counts whose sum overflows; missing buffers.
  size_t ok_counts[3] = {1, 2, 3}, huge[3] = {SIZE_MAX / 4, SIZE_MAX / 4, 1};
  CollArgs av{Collective::AllToAllV, a, b, 0, DataType::Float32, RedOp::Sum, 0, nullptr};
  av.send_counts = ok_counts;
  av.recv_counts = ok_counts;
  EXPECT_NO_THROW(validate_args(av, 1, 3));
  av.send_counts = huge;
  expect_bad(av, "send_counts sum");
  av.send_counts = ok_counts;
  av.recv = nullptr;
  expect_bad(av, "recv buffer is null");
  // Batches: every op checked; a send to self needs its recv from self.
  std::vector<P2POp> ops = {{P2POp::Kind::Send, a, 4, DataType::Float32, 0}, {P2POp::Kind::Recv, b, 4, DataType::Float32, 2}};
  CollArgs batch{Collective::SendRecv, nullptr, nullptr, 0, DataType::Float32, RedOp::Sum, 0, nullptr};
  batch.ops = ops.data();
  batch.num_ops = ops.size();
  EXPECT_NO_THROW(validate_args(batch, 1, 3));
  ops[1].peer = 5;
  expect_bad(batch, "peer 5");
  ops[1].peer = 1;
  expect_bad(batch, "recv(s) from it");
  ops[0].peer = 1;
  EXPECT_NO_THROW(validate_args(batch, 1, 3));
  ops[0].buf = reinterpret_cast<char*>(a) + 2;
  expect_bad(batch, "aligned");
}

// Input and output may share memory only in each call's in-place layout; any other overlap (an
// output that is a shifted view of the input) is refused by address range. Every collective, at
// every shift of the output across the input, on a middle rank and on the root.
TEST(Validate, PartialOverlapIsRefusedExceptTheInPlaceLayout) {
  constexpr int W = 3, me = 1;
  constexpr size_t n = 4;
  alignas(16) float buf[4 * W * n] = {};
  float* base = buf + W * n;  // room for outputs before and after the input
  struct Case {
    Collective coll;
    int root;
    long in_place;  // the output's offset (elements, relative to the input) that is in place
    size_t send_elems, recv_elems;
  };
  const Case cases[] = {
      {Collective::AllReduce, 0, 0, n, n},
      {Collective::Broadcast, me, 0, n, n},
      {Collective::Reduce, me, 0, n, n},
      {Collective::ReduceScatter, 0, long(me * n), W * n, n},
      {Collective::AllGather, 0, -long(me * n), n, W * n},
      {Collective::Gather, me, -long(me * n), n, W * n},
      {Collective::Scatter, me, long(me * n), W * n, n},
      {Collective::AllToAll, 0, LONG_MIN, W * n, W * n},
  };
  for (const Case& c : cases) {
    for (long shift = -long(W * n); shift <= long(W * n); ++shift) {
      CollArgs a{c.coll, base, base + shift, n, DataType::Float32, RedOp::Sum, c.root, nullptr};
      const long lo = shift, hi = shift + long(c.recv_elems);  // output range relative to the input
      const bool overlaps = lo < long(c.send_elems) && 0 < hi;
      const std::string what = std::string(to_string(c.coll)) + " shift " + std::to_string(shift);
      if (!overlaps || shift == c.in_place) {
        EXPECT_NO_THROW(validate_args(a, me, W)) << what;
        continue;
      }
      try {
        validate_args(a, me, W);
        ADD_FAILURE() << what << ": no error";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << what << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
      }
    }
  }
  // Off the root, the buffer the call does not use there is not compared.
  CollArgs g{Collective::Gather, base, base + 1, n, DataType::Float32, RedOp::Sum, 0, nullptr};
  EXPECT_NO_THROW(validate_args(g, me, W));
  CollArgs b{Collective::Broadcast, base + 1, base, n, DataType::Float32, RedOp::Sum, 0, nullptr};
  EXPECT_NO_THROW(validate_args(b, me, W));
}

// The descriptor that the protocols compare: only the fields that matter for the collective,
// so unused arguments never make a mismatch, and every field that matters does.
TEST(CallDesc, ComparesAndPrintsTheFieldsThatMatter) {
  float a[4];
  CollArgs ar{Collective::AllReduce, a, a, 4096, DataType::Float32, RedOp::Sum, 3, nullptr};
  EXPECT_EQ(CallDesc::of(ar).text(), "all_reduce(count=4096, float32, sum)");
  CollArgs other_root = ar;
  other_root.root = 0;
  EXPECT_EQ(CallDesc::of(ar), CallDesc::of(other_root));  // all_reduce has no root
  for (auto change : std::vector<std::function<void(CollArgs&)>>{
           [](CollArgs& x) { x.count = 2048; }, [](CollArgs& x) { x.dtype = DataType::Int32; },
           [](CollArgs& x) { x.op = RedOp::Max; }, [](CollArgs& x) { x.coll = Collective::ReduceScatter; }}) {
    CollArgs x = ar;
    change(x);
    EXPECT_NE(CallDesc::of(ar), CallDesc::of(x)) << CallDesc::of(x).text();
  }
  CollArgs bc{Collective::Broadcast, a, a, 8, DataType::Int32, RedOp::Max, 1, nullptr};
  EXPECT_EQ(CallDesc::of(bc).text(), "broadcast(count=8, int32, root=1)");
  CollArgs bc_op = bc;
  bc_op.op = RedOp::Sum;
  EXPECT_EQ(CallDesc::of(bc), CallDesc::of(bc_op));  // broadcast has no op
  bc_op.root = 0;
  EXPECT_NE(CallDesc::of(bc), CallDesc::of(bc_op));
  CollArgs bar{Collective::Barrier, nullptr, nullptr, 5, DataType::Int8, RedOp::Min, 2, nullptr};
  EXPECT_EQ(CallDesc::of(bar).text(), "barrier()");
  EXPECT_EQ(CallDesc::of(bar), CallDesc::of(CollArgs{Collective::Barrier}));
  EXPECT_NE(CallDesc::of(bar), CallDesc{});  // a slot nobody wrote never matches a call
}

// The rank named is the one off the majority wherever the odd call sits; a tie names the side
// without the lowest rank and says it is a tie.
TEST(CallDesc, MismatchVerdictNamesTheMinorityWhereverItIs) {
  for (int odd = 0; odd < 3; ++odd) {
    std::vector<std::pair<int, std::string>> calls;
    for (int r = 2; r >= 0; --r) calls.emplace_back(r, r == odd ? "X" : "Y");
    const MismatchVerdict v = mismatch_verdict(calls);
    EXPECT_EQ(v.culprit, odd);
    EXPECT_FALSE(v.tie);
    const std::string majority = odd == 0 ? "ranks 1, 2" : odd == 1 ? "ranks 0, 2" : "ranks 0, 1";
    EXPECT_EQ(v.text, "rank " + std::to_string(odd) + " called X, " + majority + " called Y");
  }
  const MismatchVerdict pair = mismatch_verdict({{1, "X"}, {0, "Y"}});
  EXPECT_EQ(pair.culprit, 1);
  EXPECT_TRUE(pair.tie);
  EXPECT_NE(pair.text.find("rank 1 called X, rank 0 called Y (a tie"), std::string::npos) << pair.text;
  const MismatchVerdict three = mismatch_verdict({{0, "A"}, {1, "B"}, {2, "C"}, {3, "B"}});
  EXPECT_EQ(three.culprit, 0);  // B has two ranks: A and C are the minorities, the lowest named
  EXPECT_FALSE(three.tie);
  EXPECT_EQ(three.text, "rank 0 called A, rank 2 called C, ranks 1, 3 called B");
}

TEST(Types, EveryCollectiveHasAName) {
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto name = to_string(static_cast<Collective>(c));
    EXPECT_NE(name, "invalid") << c;
    EXPECT_EQ(parse_collective(name), static_cast<Collective>(c)) << name;
  }
}
