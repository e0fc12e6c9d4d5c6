#include "bootstrap/wire.hpp"

#include <cstdio>
#include <cstring>
#include <type_traits>

#include "common/text.hpp"

namespace actorcc::wire {

namespace {

// Appends little-endian fields: explicit byte order, independent of the host's.
class Writer {
 public:
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void i32(int32_t v) { put(static_cast<uint32_t>(v), 4); }
  void u64(uint64_t v) { put(v, 8); }
  void raw(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  void str(std::string_view s) {
    if (s.size() > kMaxPayload) throw WireError(cat("field of ", s.size(), " bytes exceeds the frame bound"));
    u32(static_cast<uint32_t>(s.size()));
    out.append(s.data(), s.size());
  }
  void strs(const std::vector<std::string>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) str(s);
  }
  std::string out;

 private:
  void put(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
};

// Reads little-endian fields with a bounds check on every read; never reads past the end.
class Reader {
 public:
  Reader(std::string_view d, MsgType t) : d_(d), t_(t) {}
  uint16_t u16() { return static_cast<uint16_t>(get(2)); }
  uint32_t u32() { return static_cast<uint32_t>(get(4)); }
  int32_t i32() { return static_cast<int32_t>(static_cast<uint32_t>(get(4))); }
  uint64_t u64() { return get(8); }
  void raw(void* p, size_t n) {
    need(n, "raw field");
    std::memcpy(p, d_.data() + pos_, n);
    pos_ += n;
  }
  std::string str() {
    uint32_t n = u32();
    need(n, "string/blob body");
    std::string s(d_.data() + pos_, n);
    pos_ += n;
    return s;
  }
  // A count of items each at least `min_item` bytes: checked against what is left before
  // any allocation, so a garbage count cannot make us reserve gigabytes.
  uint32_t count(size_t min_item) {
    uint32_t n = u32();
    if (static_cast<uint64_t>(n) * min_item > d_.size() - pos_)
      throw WireError(cat(to_string(t_), " frame: list count ", n, " does not fit in the ", d_.size() - pos_,
                          " bytes left"));
    return n;
  }
  std::vector<std::string> strs() {
    uint32_t n = count(4);
    std::vector<std::string> v;
    v.reserve(n);
    for (uint32_t i = 0; i < n; ++i) v.push_back(str());
    return v;
  }
  void finish() const {
    if (pos_ != d_.size())
      throw WireError(cat(to_string(t_), " frame: ", d_.size() - pos_, " trailing bytes after the payload"));
  }

 private:
  void need(size_t n, const char* what) const {
    if (n > d_.size() - pos_)
      throw WireError(cat(to_string(t_), " frame truncated: ", what, " needs ", n, " bytes, ", d_.size() - pos_, " left"));
  }
  uint64_t get(int bytes) {
    need(static_cast<size_t>(bytes), "integer field");
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(d_[pos_ + i])) << (8 * i);
    pos_ += static_cast<size_t>(bytes);
    return v;
  }
  std::string_view d_;
  size_t pos_ = 0;
  MsgType t_;
};

void put_hello_fields(Writer& w, const Hello& m) {
  w.u32(m.protocol_version);
  w.i32(m.rank);
  w.i32(m.world);
  w.u64(m.join_timeout_ms);
  w.u32(m.pid);
  w.u32(m.flags);
  w.str(m.host);
  w.str(m.run_id);
  w.str(m.run_id_from);
  w.str(m.blob);
}
void put_payload(Writer& w, const Hello& m) {
  w.raw(m.mac.data(), m.mac.size());
  put_hello_fields(w, m);
}
void put_payload(Writer& w, const Challenge& m) { w.raw(m.nonce.data(), m.nonce.size()); }
void put_payload(Writer& w, const Welcome& m) { w.strs(m.blobs); }
void put_payload(Writer& w, const Reject& m) { w.str(m.reason); }
void put_payload(Writer& w, const Allgather& m) {
  w.u64(m.seq);
  w.str(m.blob);
}
void put_payload(Writer& w, const AllgatherResult& m) {
  w.u64(m.seq);
  w.strs(m.blobs);
}
void put_payload(Writer& w, const Abort& m) {
  w.i32(m.rank);
  w.str(m.reason);
  w.i32(m.culprit);
}
void put_payload(Writer& w, const PeerLost& m) {
  w.i32(m.rank);
  w.str(m.reason);
}
void put_payload(Writer& w, const JoinFailed& m) {
  w.str(m.reason);
  w.i32(m.culprit);
}
void put_payload(Writer& w, const Bye& m) { w.u64(m.collectives); }
void put_payload(Writer& w, const Status& m) { w.u64(m.seq); }
void put_payload(Writer& w, const StatusReply& m) {
  w.u64(m.seq);
  w.u32(static_cast<uint32_t>(m.missing.size()));
  for (int32_t r : m.missing) w.i32(r);
  w.str(m.text);
}
void put_payload(Writer& w, const PeerLeft& m) {
  w.i32(m.rank);
  w.u64(m.collectives);
}
void put_payload(Writer& w, const Refuse& m) {
  put_payload(w, m.hello);
  w.str(m.reason);
}

Hello read_hello(Reader& r) {
  Hello m;
  r.raw(m.mac.data(), m.mac.size());
  m.protocol_version = r.u32();
  m.rank = r.i32();
  m.world = r.i32();
  m.join_timeout_ms = r.u64();
  m.pid = r.u32();
  m.flags = r.u32();
  m.host = r.str();
  m.run_id = r.str();
  m.run_id_from = r.str();
  m.blob = r.str();
  return m;
}

}  // namespace

const char* to_string(MsgType t) {
  switch (t) {
    case MsgType::Hello: return "HELLO";
    case MsgType::Welcome: return "WELCOME";
    case MsgType::Reject: return "REJECT";
    case MsgType::Allgather: return "ALLGATHER";
    case MsgType::AllgatherResult: return "ALLGATHER_RESULT";
    case MsgType::Abort: return "ABORT";
    case MsgType::PeerLost: return "PEER_LOST";
    case MsgType::JoinFailed: return "JOIN_FAILED";
    case MsgType::Bye: return "BYE";
    case MsgType::Status: return "STATUS";
    case MsgType::StatusReply: return "STATUS_REPLY";
    case MsgType::PeerLeft: return "PEER_LEFT";
    case MsgType::Challenge: return "CHALLENGE";
    case MsgType::Refuse: return "REFUSE";
  }
  return "UNKNOWN";
}

MsgType type_of(const Message& m) { return static_cast<MsgType>(m.index() + 1); }

std::string encode(const Message& m) {
  Writer w;
  w.out.resize(kHeaderBytes);  // header filled in once the payload length is known
  std::visit([&](const auto& x) { put_payload(w, x); }, m);
  size_t len = w.out.size() - kHeaderBytes;
  if (len > kMaxPayload)
    throw WireError(cat(to_string(type_of(m)), " payload of ", len, " bytes exceeds the bound of ", kMaxPayload));
  Writer h;
  h.u32(kFrameMagic);
  h.u16(kFrameVersion);
  h.u16(static_cast<uint16_t>(type_of(m)));
  h.u32(static_cast<uint32_t>(len));
  std::memcpy(w.out.data(), h.out.data(), kHeaderBytes);
  return std::move(w.out);
}

Header decode_header(const void* data, size_t n, uint32_t max_payload) {
  if (n < kHeaderBytes)
    throw WireError(cat("frame header truncated: ", n, " of ", kHeaderBytes, " bytes"));
  Reader r(std::string_view(static_cast<const char*>(data), kHeaderBytes), MsgType::Bye);
  Header h;
  h.magic = r.u32();
  if (h.magic != kFrameMagic) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "0x%08x", h.magic);
    throw WireError(std::string("bad frame magic ") + buf + " (not an actorcc bootstrap peer?)");
  }
  h.version = r.u16();
  if (h.version != kFrameVersion)
    throw WireError(cat("frame version ", h.version, " is not supported (this build speaks ", kFrameVersion,
                        "): a peer of another actorcc version"));
  uint16_t t = r.u16();
  if (t < static_cast<uint16_t>(MsgType::Hello) || t > static_cast<uint16_t>(MsgType::Refuse))
    throw WireError(cat("unknown frame type ", t));
  h.type = static_cast<MsgType>(t);
  h.length = r.u32();
  if (h.length > max_payload)
    throw WireError(cat(to_string(h.type), " frame announces ", h.length, " payload bytes, above the bound of ",
                        max_payload));
  return h;
}

Message decode_payload(MsgType type, std::string_view payload) {
  Reader r(payload, type);
  Message out;
  switch (type) {
    case MsgType::Hello: out = read_hello(r); break;
    case MsgType::Welcome: out = Welcome{r.strs()}; break;
    case MsgType::Reject: out = Reject{r.str()}; break;
    case MsgType::Allgather: {
      Allgather m;
      m.seq = r.u64();
      m.blob = r.str();
      out = std::move(m);
      break;
    }
    case MsgType::AllgatherResult: {
      AllgatherResult m;
      m.seq = r.u64();
      m.blobs = r.strs();
      out = std::move(m);
      break;
    }
    case MsgType::Abort: {
      Abort m;
      m.rank = r.i32();
      m.reason = r.str();
      m.culprit = r.i32();
      out = std::move(m);
      break;
    }
    case MsgType::PeerLost: {
      PeerLost m;
      m.rank = r.i32();
      m.reason = r.str();
      out = std::move(m);
      break;
    }
    case MsgType::JoinFailed: out = JoinFailed{r.str(), r.i32()}; break;  // braces: read in order
    case MsgType::Bye: out = Bye{r.u64()}; break;
    case MsgType::Status: out = Status{r.u64()}; break;
    case MsgType::StatusReply: {
      StatusReply m;
      m.seq = r.u64();
      uint32_t n = r.count(4);
      m.missing.reserve(n);
      for (uint32_t i = 0; i < n; ++i) m.missing.push_back(r.i32());
      m.text = r.str();
      out = std::move(m);
      break;
    }
    case MsgType::PeerLeft: out = PeerLeft{r.i32(), r.u64()}; break;  // braces: read in order
    case MsgType::Challenge: {
      Challenge m;
      r.raw(m.nonce.data(), m.nonce.size());
      out = m;
      break;
    }
    case MsgType::Refuse: {
      Refuse m;
      m.hello = read_hello(r);
      m.reason = r.str();
      out = std::move(m);
      break;
    }
    default: throw WireError(cat("unknown frame type ", static_cast<int>(type)));
  }
  r.finish();
  return out;
}

Message decode_frame(std::string_view frame) {
  Header h = decode_header(frame.data(), frame.size());
  std::string_view payload = frame.substr(kHeaderBytes);
  if (payload.size() < h.length)
    throw WireError(cat(to_string(h.type), " frame truncated: payload has ", payload.size(), " of ", h.length, " bytes"));
  if (payload.size() > h.length)
    throw WireError(cat(to_string(h.type), " frame: ", payload.size() - h.length, " bytes beyond the announced length"));
  return decode_payload(h.type, payload);
}

bool has_frame_magic(const void* data, size_t n) {
  if (n < 4) return false;
  const auto* b = static_cast<const uint8_t*>(data);
  return (b[0] | b[1] << 8 | b[2] << 16 | static_cast<uint32_t>(b[3]) << 24) == kFrameMagic;
}

std::string hello_signed_part(const Hello& h) {
  Writer w;
  put_hello_fields(w, h);
  return std::move(w.out);
}

void FrameDecoder::feed(const void* data, size_t n) {
  // Compact lazily so a stream of small frames does not keep moving bytes around.
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(static_cast<const char*>(data), n);
}

std::optional<Message> FrameDecoder::next() {
  size_t avail = buf_.size() - pos_;
  if (avail < kHeaderBytes) return std::nullopt;
  Header h = decode_header(buf_.data() + pos_, avail, max_payload_);
  if (avail - kHeaderBytes < h.length) return std::nullopt;
  Message m = decode_payload(h.type, std::string_view(buf_.data() + pos_ + kHeaderBytes, h.length));
  pos_ += kHeaderBytes + h.length;
  return m;
}

}  // namespace actorcc::wire
