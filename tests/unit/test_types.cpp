// Public value types: names, sizes, parsers, option overrides from the environment.
#include <gtest/gtest.h>

#include <cstdlib>

#include "actorcc/actorcc.hpp"
#include "core/validate.hpp"

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

TEST(Types, EveryCollectiveHasAName) {
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto name = to_string(static_cast<Collective>(c));
    EXPECT_NE(name, "invalid") << c;
    EXPECT_EQ(parse_collective(name), static_cast<Collective>(c)) << name;
  }
}
