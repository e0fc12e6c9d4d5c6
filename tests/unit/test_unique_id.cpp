// UniqueId: layout, printable round trip, parse errors, create() defaults, and the
// deterministic from_address id.
#include <gtest/gtest.h>

#include <cstdlib>

#include "actorcc/error.hpp"
#include "actorcc/unique_id.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/id_fields.hpp"

using namespace actorcc;

namespace {
void expect_parse_error(const std::string& text, const std::string& needle) {
  try {
    UniqueId::parse(text);
    FAIL() << "parse should have thrown";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(UniqueId, CreateRoundTripsThroughText) {
  UniqueId id = UniqueId::create("127.0.0.1");
  std::string s = id.to_string();
  ASSERT_EQ(s.size(), 256u);
  EXPECT_EQ(s.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(UniqueId::parse(s), id);
  // Upper-case hex is accepted too.
  std::string upper = s;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(UniqueId::parse(upper), id);

  auto f = bootstrap::read_id(id);
  EXPECT_EQ(f.root.ip(), "127.0.0.1");
  EXPECT_NE(f.root.port(), 0);
  EXPECT_FALSE(f.rank0_hosts);
  // The unused tail is zero.
  for (size_t i = 48; i < UniqueId::kBytes; ++i) EXPECT_EQ(id.bytes[i], 0) << i;
}

TEST(UniqueId, TokensAreRandom) {
  UniqueId a = UniqueId::create("127.0.0.1"), b = UniqueId::create("127.0.0.1");
  EXPECT_NE(bootstrap::read_id(a).token, bootstrap::read_id(b).token);
  EXPECT_NE(bootstrap::read_id(a).token, wire::Token{});
}

TEST(UniqueId, ParseRejectsBadText) {
  std::string good = UniqueId::create("127.0.0.1").to_string();
  expect_parse_error("", "256 hex characters");
  expect_parse_error(good.substr(1), "256 hex characters");
  expect_parse_error(good + "00", "256 hex characters");
  std::string bad = good;
  bad[100] = 'g';
  expect_parse_error(bad, "non-hex character at position 100");
  expect_parse_error(std::string(256, '0'), "magic");
  bad = good;
  bad[255] = '1';  // reserved tail not zero
  expect_parse_error(bad, "reserved");
  bad = good;
  bad[12] = '0';
  bad[13] = '9';  // address family 9
  expect_parse_error(bad, "family");
}

TEST(UniqueId, DefaultHostComesFromEnvironment) {
  ::setenv("ACTORCC_SOCKET_ADDR", "127.0.0.1", 1);
  UniqueId id = UniqueId::create();
  ::unsetenv("ACTORCC_SOCKET_ADDR");
  EXPECT_EQ(bootstrap::read_id(id).root.ip(), "127.0.0.1");
  // Without the variable: some IPv4 address of this host (non-loopback if there is one).
  UniqueId id2 = UniqueId::create();
  EXPECT_EQ(bootstrap::read_id(id2).root.family(), AF_INET);
}

TEST(UniqueId, AddressIdIsDeterministic) {
  UniqueId a = address_unique_id("127.0.0.1", 29500, 4);
  UniqueId b = address_unique_id("127.0.0.1", 29500, 4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, address_unique_id("127.0.0.1", 29500, 8));
  EXPECT_NE(a, address_unique_id("127.0.0.1", 29501, 4));
  auto f = bootstrap::read_id(a);
  EXPECT_TRUE(f.rank0_hosts);
  EXPECT_EQ(f.world, 4);
  EXPECT_EQ(f.root.port(), 29500);
  EXPECT_EQ(UniqueId::parse(a.to_string()), a);
  EXPECT_THROW(address_unique_id("127.0.0.1", 0, 4), InvalidArgument);
  EXPECT_THROW(address_unique_id("127.0.0.1", 29500, 0), InvalidArgument);
  EXPECT_THROW(address_unique_id("no-such-host.invalid", 29500, 2), InvalidArgument);
  EXPECT_THROW(start_root_for(UniqueId::create("127.0.0.1")), InvalidArgument);
}
