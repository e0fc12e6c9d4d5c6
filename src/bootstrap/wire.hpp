// The bootstrap wire protocol: length-prefixed frames with an explicit little-endian layout,
// so a frame means the same on every host and garbage is recognised instead of trusted.
//
//   frame  = header payload
//   header = magic u32 | frame version u16 | type u16 | payload length u32      (12 bytes)
//   u8/u16/u32/u64/i32 little-endian; str/bytes = u32 length + raw bytes
//
// The frame version covers this framing only; the protocol version the root checks travels
// in HELLO, so a peer of another protocol version still gets a readable REJECT.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace actorcc::wire {

constexpr uint32_t kFrameMagic = 0x41435443;  // "CTCA" on the wire: actorcc control
constexpr uint16_t kFrameVersion = 3;  // 3: CHALLENGE, HELLO's MAC, run id and flags (2: BYE's count, PEER_LEFT)
// Bump when message meaning changes (2: culprits in ABORT, JOIN_FAILED; 3: the root's challenge,
// HELLO authenticated by a MAC over it instead of carrying the token, run ids, duplicate claims
// of a rank poison the group).
constexpr uint32_t kProtocolVersion = 3;
constexpr size_t kHeaderBytes = 12;
// Bootstrap blobs are peer descriptors (a few KiB); anything near this bound is garbage.
constexpr uint32_t kMaxPayload = 64u << 20;
// Before a connection has authenticated, the root accepts no frame larger than a HELLO can
// honestly be (token, a few integers, a host name and one peer descriptor): a stranger must not
// make the root buffer megabytes per connection.
constexpr uint32_t kMaxHelloPayload = 64u << 10;
// No group is larger than this: the root refuses a HELLO claiming more, and the calls that size
// anything by a world (grow) check it first.
constexpr int kMaxWorld = 1 << 16;

// A malformed frame: truncated, bad magic/version, unknown type, oversized, bad payload.
class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class MsgType : uint16_t {
  Hello = 1,
  Welcome = 2,
  Reject = 3,
  Allgather = 4,
  AllgatherResult = 5,
  Abort = 6,
  PeerLost = 7,
  JoinFailed = 8,
  Bye = 9,
  Status = 10,       // client -> root: who has not arrived at allgather `seq`?
  StatusReply = 11,  // root -> client: the answer, for a timeout message
  PeerLeft = 12,     // root -> client: a rank closed its communicator (after a BYE)
  Challenge = 13,    // root -> connection, at once on accept: the nonce its HELLO must answer
  Refuse = 14,       // joiner -> root, instead of HELLO: it will not join (a local mistake)
};
const char* to_string(MsgType t);

using Token = std::array<uint8_t, 16>;

// The token never travels: `mac` is a keyed hash, under the group's token, of the root's
// CHALLENGE nonce for this connection and every field below (bootstrap/hello_auth.hpp), so a
// HELLO captured on the wire is useless on any other connection.
struct Hello {
  Token mac{};
  uint32_t protocol_version = kProtocolVersion;
  int32_t rank = -1;
  int32_t world = 0;
  uint64_t join_timeout_ms = 0;  // the root enforces the join deadline of the earliest joiner
  uint32_t pid = 0;              // pid and host make error messages name the process
  uint32_t flags = 0;            // kHelloSecondRoot
  std::string host;
  std::string run_id;       // the launch this rank belongs to, as its launcher names it ("" = none)
  std::string run_id_from;  // where run_id came from (ACTORCC_RUN_ID, SLURM_JOB_ID, ...), for messages
  std::string blob;
  bool operator==(const Hello&) const = default;
};
// A rank 0 that could not listen on its id's address because something holds it: it tells the
// root there (if that is one of this group's), which poisons its group, and joins nothing.
inline constexpr uint32_t kHelloSecondRoot = 1;
// The root's first frame on every connection: a fresh nonce (never repeated by a root) that
// the connection's HELLO must answer.
struct Challenge {
  Token nonce{};
  bool operator==(const Challenge&) const = default;
};
// A CHALLENGE's payload; a joiner reads no larger frame before it has one.
inline constexpr uint32_t kChallengePayload = 16;
struct Welcome {
  std::vector<std::string> blobs;  // indexed by rank
  bool operator==(const Welcome&) const = default;
};
struct Reject {
  std::string reason;
  bool operator==(const Reject&) const = default;
};
struct Allgather {
  uint64_t seq = 0;
  std::string blob;
  bool operator==(const Allgather&) const = default;
};
struct AllgatherResult {
  uint64_t seq = 0;
  std::vector<std::string> blobs;
  bool operator==(const AllgatherResult&) const = default;
};
struct Abort {
  int32_t rank = -1;  // the rank that aborts (-1: the root); the root sets it from the connection
  std::string reason;
  int32_t culprit = -1;  // the rank at fault as the aborting rank knows it (itself, or whom it waited for)
  bool operator==(const Abort&) const = default;
};
struct PeerLost {
  int32_t rank = -1;
  std::string reason;
  bool operator==(const PeerLost&) const = default;
};
struct JoinFailed {
  std::string reason;
  int32_t culprit = -1;  // the first rank that did not join, when the join timed out for want of one
  bool operator==(const JoinFailed&) const = default;
};
// A clean leave. `collectives`: how many collective calls the leaver issued on the group, so
// the others know which of their calls it never joined (those can never complete).
struct Bye {
  uint64_t collectives = 0;
  bool operator==(const Bye&) const = default;
};
struct Status {
  uint64_t seq = 0;
  bool operator==(const Status&) const = default;
};
// Also sent unasked while a group forms, every few seconds, to the ranks already in it, with
// seq kJoinStatusSeq: which ranks have not joined yet (the ranks log it).
inline constexpr uint64_t kJoinStatusSeq = ~uint64_t{0};
struct StatusReply {
  uint64_t seq = 0;
  std::vector<int32_t> missing;  // ranks that have not sent allgather `seq`
  std::string text;              // the root's description, e.g. "rank 3 of 4 has not arrived"
  bool operator==(const StatusReply&) const = default;
};

struct PeerLeft {
  int32_t rank = -1;
  uint64_t collectives = 0;  // from its BYE
  bool operator==(const PeerLeft&) const = default;
};

// A joiner that found a mistake of its own after it learned the group's address (a bad option,
// a rank out of range, no usable device) says so instead of HELLO, so the group fails at once,
// naming it and why, rather than at the join deadline. `hello` is what its HELLO would have
// been (its token authenticates the refusal as a HELLO's does; blob empty); the root answers it
// with the group's failure and closes.
struct Refuse {
  Hello hello;
  std::string reason;
  bool operator==(const Refuse&) const = default;
};

// Alternative order matches MsgType - 1.
using Message = std::variant<Hello, Welcome, Reject, Allgather, AllgatherResult, Abort, PeerLost, JoinFailed, Bye,
                             Status, StatusReply, PeerLeft, Challenge, Refuse>;
MsgType type_of(const Message& m);

struct Header {
  uint32_t magic = kFrameMagic;
  uint16_t version = kFrameVersion;
  MsgType type = MsgType::Bye;
  uint32_t length = 0;
};

// Whole frame (header + payload) for `m`. Throws WireError if the payload would exceed
// kMaxPayload.
std::string encode(const Message& m);

// Validates and decodes a 12-byte header; throws WireError (bad magic, version, unknown type,
// length above `max_payload`).
Header decode_header(const void* data, size_t n, uint32_t max_payload = kMaxPayload);
// Decodes a payload of the given type; throws WireError on truncation or trailing bytes.
Message decode_payload(MsgType type, std::string_view payload);
// Decodes exactly one whole frame.
Message decode_frame(std::string_view frame);
// True when the first 4 of `n` bytes are the frame magic: an actorcc peer (of any version).
bool has_frame_magic(const void* data, size_t n);
// The bytes of a HELLO that its MAC covers: its encoded payload after the MAC.
std::string hello_signed_part(const Hello& h);

// Incremental decoder for a byte stream (the root's non-blocking sockets): feed what arrived,
// then take complete messages. A bad header throws as soon as its 12 bytes are in.
class FrameDecoder {
 public:
  // Frames above `max_payload` throw as soon as their header is in (see kMaxHelloPayload).
  void set_max_payload(uint32_t max_payload) { max_payload_ = max_payload; }
  void feed(const void* data, size_t n);
  std::optional<Message> next();
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;
  uint32_t max_payload_ = kMaxPayload;
};

}  // namespace actorcc::wire
