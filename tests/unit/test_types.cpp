// Public value types: names, sizes, parsers, option overrides from the environment.
#include <gtest/gtest.h>

#include <cstdlib>

#include "actorcc/actorcc.hpp"
#include "core/validate.hpp"

using namespace actorcc;

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
  auto expect_bad = [](CollArgs x, const char* needle) {
    try {
      validate_args(x, 1, 2);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
  };
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
