// UniqueId's printable form and create(); the byte layout lives in id_fields.cpp.
#include "actorcc/unique_id.hpp"

#include <cstring>

#include "actorcc/error.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/id_fields.hpp"
#include "bootstrap/root.hpp"
#include "common/text.hpp"

namespace actorcc {

namespace {
constexpr char kHex[] = "0123456789abcdef";
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

UniqueId UniqueId::create(const std::string& host, uint16_t port, bool creator_is_rank0) {
  return start_root(host, port, creator_is_rank0);
}

bool UniqueId::stop_root_if_unused() const {
  bootstrap::IdFields f;
  try {
    f = bootstrap::read_id(*this);
  } catch (const InvalidArgument&) {
    return false;  // not an id any root serves
  }
  return !f.rank0_hosts && bootstrap::stop_root_if_unused(f.token);
}

std::string UniqueId::to_string() const {
  std::string s;
  s.reserve(2 * kBytes);
  for (uint8_t b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

UniqueId UniqueId::parse(const std::string& text) {
  if (text.size() != 2 * kBytes)
    throw InvalidArgument(cat("UniqueId text must be ", 2 * kBytes, " hex characters, got ", text.size()));
  UniqueId id;
  for (size_t i = 0; i < kBytes; ++i) {
    int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      size_t at = hi < 0 ? 2 * i : 2 * i + 1;
      throw InvalidArgument(cat("UniqueId text has a non-hex character at position ", at));
    }
    id.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return from_bytes(id.bytes.data(), id.bytes.size());
}

UniqueId UniqueId::from_bytes(const void* data, size_t n) {
  if (n != kBytes)
    throw InvalidArgument(cat("a UniqueId is ", kBytes, " bytes, got ", n));
  UniqueId id;
  std::memcpy(id.bytes.data(), data, kBytes);
  bootstrap::read_id(id);  // validates magic, family, reserved bytes
  return id;
}

}  // namespace actorcc
