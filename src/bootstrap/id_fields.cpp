#include "bootstrap/id_fields.hpp"

#include <netinet/in.h>

#include <cstring>
#include <random>

#include "actorcc/error.hpp"
#include "common/text.hpp"

namespace actorcc::bootstrap {

namespace {

constexpr uint8_t kMagic[4] = {'A', 'C', 'I', 'D'};
constexpr size_t kVersionAt = 4, kFamilyAt = 6, kFlagsAt = 7, kPortAt = 8, kAddrAt = 12, kTokenAt = 28,
                 kWorldAt = 44, kUsedEnd = 48;
constexpr uint8_t kFlagRank0Hosts = 1;
constexpr uint8_t kFlagCreatorIsRank0 = 2;

void put_le(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

UniqueId make_id(const IdFields& f) {
  UniqueId id;
  uint8_t* b = id.bytes.data();
  std::memcpy(b, kMagic, 4);
  put_le(b + kVersionAt, f.version, 2);
  put_le(b + kPortAt, f.root.port(), 2);
  if (f.root.family() == AF_INET6) {
    b[kFamilyAt] = 6;
    std::memcpy(b + kAddrAt, &reinterpret_cast<const sockaddr_in6*>(&f.root.ss)->sin6_addr, 16);
  } else {
    b[kFamilyAt] = 4;
    std::memcpy(b + kAddrAt, &reinterpret_cast<const sockaddr_in*>(&f.root.ss)->sin_addr, 4);
  }
  b[kFlagsAt] = static_cast<uint8_t>((f.rank0_hosts ? kFlagRank0Hosts : 0) | (f.creator_is_rank0 ? kFlagCreatorIsRank0 : 0));
  std::memcpy(b + kTokenAt, f.token.data(), f.token.size());
  put_le(b + kWorldAt, static_cast<uint32_t>(f.world), 4);
  return id;
}

IdFields read_id(const UniqueId& id) {
  const uint8_t* b = id.bytes.data();
  if (std::memcmp(b, kMagic, 4) != 0)
    throw InvalidArgument("not an actorcc UniqueId: bad magic (expected it to start with \"ACID\")");
  IdFields f;
  f.version = static_cast<uint16_t>(get_le(b + kVersionAt, 2));
  uint8_t fam = b[kFamilyAt];
  if (fam != 4 && fam != 6)
    throw InvalidArgument(cat("corrupt actorcc UniqueId: address family byte is ", fam, ", not 4 or 6"));
  if (b[kFlagsAt] & ~(kFlagRank0Hosts | kFlagCreatorIsRank0)) throw InvalidArgument("corrupt actorcc UniqueId: unknown flag bits");
  for (size_t i = 10; i < 12; ++i)
    if (b[i]) throw InvalidArgument("corrupt actorcc UniqueId: reserved bytes are not zero");
  for (size_t i = kUsedEnd; i < UniqueId::kBytes; ++i)
    if (b[i]) throw InvalidArgument("corrupt actorcc UniqueId: reserved bytes are not zero");
  // One group, one byte string: bytes no field uses must be zero, so two ids that differ
  // always name different roots or groups (the group tag is derived from the bytes).
  if (fam == 4)
    for (size_t i = kAddrAt + 4; i < kTokenAt; ++i)
      if (b[i]) throw InvalidArgument("corrupt actorcc UniqueId: unused IPv6 address bytes of an IPv4 id are not zero");
  const bool rank0_hosts = (b[kFlagsAt] & kFlagRank0Hosts) != 0;
  const auto world = static_cast<int32_t>(static_cast<uint32_t>(get_le(b + kWorldAt, 4)));
  if (!rank0_hosts && world != 0)
    throw InvalidArgument(cat("corrupt actorcc UniqueId: world field is ", world,
                              " in an id made by UniqueId::create (must be 0)"));
  if (rank0_hosts && world <= 0)
    throw InvalidArgument(cat("corrupt actorcc UniqueId: from_address id with world ", world));
  uint16_t port = static_cast<uint16_t>(get_le(b + kPortAt, 2));
  if (port == 0) throw InvalidArgument("corrupt actorcc UniqueId: root port is 0");
  if (fam == 6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&f.root.ss);
    s->sin6_family = AF_INET6;
    std::memcpy(&s->sin6_addr, b + kAddrAt, 16);
    f.root.len = sizeof(sockaddr_in6);
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(&f.root.ss);
    s->sin_family = AF_INET;
    std::memcpy(&s->sin_addr, b + kAddrAt, 4);
    f.root.len = sizeof(sockaddr_in);
  }
  f.root.set_port(port);
  f.rank0_hosts = rank0_hosts;
  f.creator_is_rank0 = (b[kFlagsAt] & kFlagCreatorIsRank0) != 0;
  std::memcpy(f.token.data(), b + kTokenAt, f.token.size());
  f.world = world;
  return f;
}

wire::Token random_token() {
  std::random_device rd;  // libstdc++: getrandom()/dev/urandom, not a seeded PRNG
  wire::Token t;
  for (size_t i = 0; i < t.size(); i += 4) put_le(t.data() + i, rd(), 4);
  return t;
}

}  // namespace actorcc::bootstrap
