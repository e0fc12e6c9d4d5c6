// Errors that named nobody, or the wrong rank. A rank with the token but a peer
// descriptor nobody can read is named by every rank.
#include <gtest/gtest.h>

#include <thread>
#include <variant>

#include "actorcc/communicator.hpp"
#include "actorcc/error.hpp"
#include "bootstrap_harness.hpp"

using namespace bootstrap_test;

TEST(Culprits, MalformedPeerDescriptorNamesTheRankThatSentIt) {
  UniqueId id = UniqueId::create("127.0.0.1");
  Options o;
  o.backend = Backend::Cpu;
  o.join_timeout = milliseconds(10000);
  std::string msg;
  int culprit = -2;
  ErrorCode code = ErrorCode::Internal;
  std::thread r0([&] {
    try {
      Communicator c(id, 0, 2, o);
    } catch (const Error& e) {
      msg = e.what();
      culprit = e.culprit();
      code = e.code();
    }
  });
  // Rank 1 holds the token but sends a descriptor that is not one (truncated length).
  wire::Token nonce{};
  net::Fd raw = raw_connect(id, &nonce);
  wire::Hello h = hello_for(id, 1, 2);
  h.blob = "\x01\x02";
  ASSERT_EQ(wire::send_message(raw.get(), signed_hello(h, nonce), in(milliseconds(2000))).status, net::IoStatus::Ok);
  auto w = wire::recv_message(raw.get(), in(milliseconds(10000)));
  r0.join();
  ASSERT_TRUE(w.msg && std::holds_alternative<wire::Welcome>(*w.msg));
  EXPECT_EQ(culprit, 1) << msg;
  EXPECT_EQ(code, ErrorCode::Remote) << msg;
  EXPECT_TRUE(contains(msg, "rank 0: rank 1 joined with a peer descriptor this rank cannot read")) << msg;
  EXPECT_TRUE(contains(msg, "malformed peer info")) << msg;
}
