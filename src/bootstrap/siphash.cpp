#include "bootstrap/siphash.hpp"

namespace actorcc::bootstrap {

namespace {

uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }
uint64_t load_le(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
void store_le(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

struct State {
  uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
    v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
  }
  void rounds(int n) {
    for (int i = 0; i < n; ++i) round();
  }
  void absorb(uint64_t m) {
    v3 ^= m;
    rounds(2);
    v0 ^= m;
  }
};

}  // namespace

std::array<uint8_t, 16> siphash128(const SipKey& key, std::string_view msg) {
  const uint64_t k0 = load_le(key.data(), 8), k1 = load_le(key.data() + 8, 8);
  State s{0x736f6d6570736575ULL ^ k0, 0x646f72616e646f6dULL ^ k1, 0x6c7967656e657261ULL ^ k0,
          0x7465646279746573ULL ^ k1};
  s.v1 ^= 0xee;  // the 128-bit variant
  const auto* p = reinterpret_cast<const uint8_t*>(msg.data());
  const size_t n = msg.size(), whole = n - n % 8;
  for (size_t i = 0; i < whole; i += 8) s.absorb(load_le(p + i, 8));
  s.absorb((static_cast<uint64_t>(n) << 56) | load_le(p + whole, n - whole));
  std::array<uint8_t, 16> out{};
  s.v2 ^= 0xee;
  s.rounds(4);
  store_le(out.data(), s.v0 ^ s.v1 ^ s.v2 ^ s.v3);
  s.v1 ^= 0xdd;
  s.rounds(4);
  store_le(out.data() + 8, s.v0 ^ s.v1 ^ s.v2 ^ s.v3);
  return out;
}

}  // namespace actorcc::bootstrap
