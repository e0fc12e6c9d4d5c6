// Byte blobs (IPC handles) as lowercase hex text, for the bootstrap all-gathers of the IPC
// transport (workspace handles, registered-buffer handles).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace actorcc::ipc {

inline std::string to_hex(const void* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    uint8_t b = static_cast<const uint8_t*>(p)[i];
    s += d[b >> 4];
    s += d[b & 15];
  }
  return s;
}
// False when `s` is not 2n characters long.
inline bool from_hex(const std::string& s, void* out, size_t n) {
  if (s.size() != 2 * n) return false;
  auto v = [](char c) { return c >= 'a' ? c - 'a' + 10 : c - '0'; };
  for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(v(s[2 * i]) << 4 | v(s[2 * i + 1]));
  return true;
}

}  // namespace actorcc::ipc
