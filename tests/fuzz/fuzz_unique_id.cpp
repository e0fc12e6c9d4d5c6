// libFuzzer target: UniqueId bytes and text, which arrive from launchers, pickles and users.
// Properties: read_id accepts only canonical bytes (an accepted id re-encodes to the very same
// 128 bytes, so one group has exactly one id); parse() either throws InvalidArgument or gives
// an id whose text is the input, lower-cased.
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "actorcc/error.hpp"
#include "actorcc/unique_id.hpp"
#include "bootstrap/id_fields.hpp"

using namespace actorcc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= UniqueId::kBytes) {
    UniqueId id;
    std::memcpy(id.bytes.data(), data, UniqueId::kBytes);
    try {
      bootstrap::IdFields f = bootstrap::read_id(id);
      if (!(bootstrap::make_id(f) == id)) std::abort();  // canonical
    } catch (const InvalidArgument&) {
    }
  }
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    UniqueId id = UniqueId::parse(text);
    std::string lower = text;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (id.to_string() != lower) std::abort();
  } catch (const InvalidArgument&) {
  }
  return 0;
}
