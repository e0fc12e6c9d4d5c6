// libFuzzer target: the bootstrap wire decoder, on bytes a stranger sends to the root.
// Properties: decoding never crashes or over-allocates (ASan, -rss_limit_mb), throws only
// WireError; whatever decodes re-encodes to a frame that decodes to the same message; the
// stream decoder with the pre-authentication cap accepts no frame above kMaxHelloPayload.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bootstrap/wire.hpp"

using namespace actorcc::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    Message m = decode_frame(bytes);
    if (!(decode_frame(encode(m)) == m)) std::abort();  // the round trip must be exact
  } catch (const WireError&) {
  }
  // The root's path: arbitrary chunking, the HELLO cap before authentication.
  FrameDecoder d;
  d.set_max_payload(kMaxHelloPayload);
  size_t pos = 0, step = size ? (data[0] % 7) + 1 : 1;
  try {
    while (pos < size) {
      const size_t n = std::min(step, size - pos);
      d.feed(data + pos, n);
      pos += n;
      while (auto m = d.next())
        if (encode(*m).size() > kHeaderBytes + kMaxHelloPayload) std::abort();
      if (d.buffered() > kHeaderBytes + kMaxHelloPayload + step) std::abort();  // bounded buffering
    }
  } catch (const WireError&) {
  }
  return 0;
}
