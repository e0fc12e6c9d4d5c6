#include "transport/tcp/frame.hpp"

#include <cstring>

namespace actorcc::tcp {
namespace {

// Little-endian, whatever the host: both ends may be different machines.
template <typename T>
void put(uint8_t*& p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) *p++ = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}
template <typename T>
T get(const uint8_t*& p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(*p++) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace

std::array<uint8_t, kHelloBytes> encode(const Hello& h) {
  std::array<uint8_t, kHelloBytes> out{};
  uint8_t* p = out.data();
  put<uint32_t>(p, kHelloMagic);
  put<uint16_t>(p, kTransportVersion);
  put<uint16_t>(p, 0);
  std::memcpy(p, h.token.data(), h.token.size());
  p += h.token.size();
  put<int32_t>(p, h.from_rank);
  put<int32_t>(p, h.to_rank);
  put<int32_t>(p, h.world);
  return out;
}

std::optional<Hello> decode_hello(const uint8_t* bytes, std::string* why) {
  const uint8_t* p = bytes;
  if (get<uint32_t>(p) != kHelloMagic) {
    if (why) *why = "not an actorcc TCP transport connection (bad magic)";
    return std::nullopt;
  }
  uint16_t version = get<uint16_t>(p);
  if (version != kTransportVersion) {
    if (why) *why = "TCP transport version " + std::to_string(version) + ", expected " + std::to_string(kTransportVersion);
    return std::nullopt;
  }
  if (get<uint16_t>(p) != 0) {
    if (why) *why = "reserved hello bytes set";
    return std::nullopt;
  }
  Hello h;
  std::memcpy(h.token.data(), p, h.token.size());
  p += h.token.size();
  h.from_rank = get<int32_t>(p);
  h.to_rank = get<int32_t>(p);
  h.world = get<int32_t>(p);
  return h;
}

std::string check_hello(const Hello& h, const wire::Token& token, int self, int world) {
  // Constant time, so the comparison does not tell a prober how much of a guess was right.
  uint8_t diff = 0;
  for (size_t i = 0; i < token.size(); ++i) diff |= static_cast<uint8_t>(h.token[i] ^ token[i]);
  if (diff != 0) return "wrong group token";
  if (h.world != world) return "world " + std::to_string(h.world) + ", expected " + std::to_string(world);
  if (h.to_rank != self) return "addressed to rank " + std::to_string(h.to_rank);
  if (h.from_rank < 0 || h.from_rank >= world) return "sender rank " + std::to_string(h.from_rank) + " out of range";
  return "";
}

std::array<uint8_t, kFrameHeaderBytes> encode(const FrameHeader& f) {
  std::array<uint8_t, kFrameHeaderBytes> out{};
  uint8_t* p = out.data();
  put<uint32_t>(p, kFrameMagic);
  put<uint32_t>(p, 0);
  put<uint64_t>(p, f.tag);
  put<uint64_t>(p, f.length);
  put<uint64_t>(p, f.call.count);
  put<int32_t>(p, f.call.root);
  for (uint8_t b : {f.call.coll, f.call.dtype, f.call.op, f.call.valid}) *p++ = b;
  return out;
}

std::optional<FrameHeader> decode_frame_header(const uint8_t* bytes) {
  const uint8_t* p = bytes;
  if (get<uint32_t>(p) != kFrameMagic || get<uint32_t>(p) != 0) return std::nullopt;
  FrameHeader f;
  f.tag = get<uint64_t>(p);
  f.length = get<uint64_t>(p);
  f.call.count = get<uint64_t>(p);
  f.call.root = get<int32_t>(p);
  f.call.coll = *p++;
  f.call.dtype = *p++;
  f.call.op = *p++;
  f.call.valid = *p++;
  return f;
}

}  // namespace actorcc::tcp
