// UniqueId: layout, printable round trip, parse errors, create() defaults, and the
// deterministic from_address id.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>

#include "actorcc/communicator.hpp"
#include "actorcc/error.hpp"
#include "actorcc/unique_id.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/id_fields.hpp"
#include "bootstrap/siphash.hpp"

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

// Canonical bytes: a byte no field uses must be zero, so one group has one id.
TEST(UniqueId, UnusedBytesMustBeZero) {
  const std::string good = UniqueId::create("127.0.0.1").to_string();
  std::string bad = good;
  bad[2 * 20] = 'f';  // inside the IPv6 part of the address field, unused by an IPv4 id
  expect_parse_error(bad, "unused IPv6 address bytes");
  bad = good;
  bad[2 * 44] = '0';
  bad[2 * 44 + 1] = '3';  // world field of a create() id
  expect_parse_error(bad, "world field is 3");
  UniqueId a = address_unique_id("127.0.0.1", 29500, 4);
  UniqueId z = a;
  z.bytes[44] = z.bytes[45] = z.bytes[46] = z.bytes[47] = 0;  // from_address id without a world
  expect_parse_error(z.to_string(), "from_address id with world 0");
}

// SipHash-2-4-128 reference vectors (key 00..0f, message 00..len-1), so the from_address token is
// the keyed PRF it claims to be.
TEST(UniqueId, SipHashMatchesTheReference) {
  bootstrap::SipKey k;
  for (int i = 0; i < 16; ++i) k[i] = static_cast<uint8_t>(i);
  const std::array<uint8_t, 16> empty = {0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6,
                                         0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02, 0x93};
  EXPECT_EQ(bootstrap::siphash128(k, ""), empty);
  const std::array<uint8_t, 16> one = {0xda, 0x87, 0xc1, 0xd8, 0x6b, 0x99, 0xaf, 0x44,
                                       0x34, 0x76, 0x59, 0x11, 0x9b, 0x22, 0xfc, 0x45};
  EXPECT_EQ(bootstrap::siphash128(k, std::string(1, '\0')), one);
  std::string msg;  // 15 bytes: one whole word and a 7-byte tail
  for (int i = 0; i < 15; ++i) msg.push_back(static_cast<char>(i));
  const std::array<uint8_t, 16> fifteen = {0x54, 0x93, 0xe9, 0x99, 0x33, 0xb0, 0xa8, 0x11,
                                           0x7e, 0x08, 0xec, 0x0f, 0x97, 0xcf, 0xc3, 0xd9};
  EXPECT_EQ(bootstrap::siphash128(k, msg), fifteen);
}

// The from_address token is secret: it depends on ACTORCC_BOOTSTRAP_SECRET, so knowing host,
// port and world is not enough; without a secret only loopback is allowed.
TEST(UniqueId, AddressTokenNeedsTheSecret) {
  UniqueId open = address_unique_id("127.0.0.1", 29500, 4);
  ::setenv("ACTORCC_BOOTSTRAP_SECRET", "s3cret-one", 1);
  UniqueId one = address_unique_id("127.0.0.1", 29500, 4);
  UniqueId one_again = address_unique_id("127.0.0.1", 29500, 4);
  ::setenv("ACTORCC_BOOTSTRAP_SECRET", "s3cret-two", 1);
  UniqueId two = address_unique_id("127.0.0.1", 29500, 4);
  UniqueId remote = address_unique_id("10.11.12.13", 29500, 4);  // allowed with a secret
  ::unsetenv("ACTORCC_BOOTSTRAP_SECRET");
  EXPECT_EQ(one, one_again);
  EXPECT_NE(bootstrap::read_id(open).token, bootstrap::read_id(one).token);
  EXPECT_NE(bootstrap::read_id(one).token, bootstrap::read_id(two).token);
  EXPECT_EQ(bootstrap::read_id(remote).root.ip(), "10.11.12.13");
  try {
    address_unique_id("10.11.12.13", 29500, 4);
    FAIL() << "a non-loopback from_address without a secret must be refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ACTORCC_BOOTSTRAP_SECRET"), std::string::npos) << e.what();
  }
}

// A corrupt id given to the constructor (through the C++ API or a copy that lost
// bytes) first logged a warning about a successor socket, the error itself coming after it. Now
// the constructor checks the id before anything else: one error naming the id as unusable and
// what is wrong with it, and no warning. from_bytes() checks what parse() checks.
TEST(UniqueId, ACorruptIdIsOneErrorSayingWhatIsWrong) {
  UniqueId bad = UniqueId::create("127.0.0.1");
  bad.bytes[100] = 1;  // a reserved byte
  testing::internal::CaptureStderr();
  std::string what;
  try {
    Communicator c(bad, 0, 1, Options{});
  } catch (const InvalidArgument& e) {
    what = e.what();
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(what.find("this rank's UniqueId cannot be used: corrupt actorcc UniqueId: reserved bytes are not zero"),
            std::string::npos)
      << what;
  EXPECT_EQ(err.find("successor"), std::string::npos) << err;
  try {
    UniqueId::from_bytes(bad.bytes.data(), bad.bytes.size());
    FAIL() << "from_bytes accepted a corrupt id";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("reserved bytes are not zero"), std::string::npos) << e.what();
  }
  EXPECT_THROW(UniqueId::from_bytes(bad.bytes.data(), 12), InvalidArgument);
}
