// The TCP transport's two fixed-size records. Both are read whole before anything is
// allocated or written into a caller's buffer, so a peer (or a stranger on the port) can make
// a rank read at most one record before it is rejected:
//  - Hello: first bytes on every connection, both ways. Carries the group's 128-bit token
//    (from the UniqueId) and the sender's and intended receiver's ranks; a connection whose
//    hello does not match is closed before it is given a slot.
//  - FrameHeader: before every message. The receiver has posted a buffer of known size and
//    knows the tag it expects; a header with another tag or length is a protocol error
//    (ranks called different collectives), reported without reading the payload. It also
//    carries the sender's call descriptor (group/call_desc.hpp; all zeros outside a
//    collective), so ranks on different nodes that disagree on a call are caught at the first
//    frame between them and named with both calls, at 16 bytes per frame.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "bootstrap/wire.hpp"
#include "group/call_desc.hpp"

namespace actorcc::tcp {

inline constexpr uint32_t kHelloMagic = 0x50544341;  // "ACTP"
inline constexpr uint32_t kFrameMagic = 0x46544341;  // "ACTF"
inline constexpr uint16_t kTransportVersion = 2;  // 2: the call descriptor in FrameHeader

struct Hello {
  wire::Token token{};
  int32_t from_rank = -1;
  int32_t to_rank = -1;
  int32_t world = 0;
};
inline constexpr size_t kHelloBytes = 4 + 2 + 2 + 16 + 4 + 4 + 4;

std::array<uint8_t, kHelloBytes> encode(const Hello& h);
// nullopt with `why` set for a record that is not a hello of this transport version.
std::optional<Hello> decode_hello(const uint8_t* bytes, std::string* why);
// Checks a decoded hello against what this end expects: token (compared in constant time),
// receiver, world and a sender in [0, world). Returns "" when it matches, else why not.
std::string check_hello(const Hello& h, const wire::Token& token, int self, int world);

struct FrameHeader {
  uint64_t tag = 0;
  uint64_t length = 0;
  CallDesc call{};
};
inline constexpr size_t kFrameHeaderBytes = 4 + 4 + 8 + 8 + 8 + 4 + 4;

std::array<uint8_t, kFrameHeaderBytes> encode(const FrameHeader& f);
std::optional<FrameHeader> decode_frame_header(const uint8_t* bytes);

}  // namespace actorcc::tcp
