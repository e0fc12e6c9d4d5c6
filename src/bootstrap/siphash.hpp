// SipHash-2-4 with a 128-bit output (Aumasson and Bernstein's keyed PRF): the from_address path
// derives its join token from the launcher's secret with it, so only a holder of the secret can
// compute the token. Small and dependency-free; not a general-purpose cryptographic hash.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

namespace actorcc::bootstrap {

using SipKey = std::array<uint8_t, 16>;

// SipHash-2-4-128 of `msg` under `key` (the reference implementation's byte order).
std::array<uint8_t, 16> siphash128(const SipKey& key, std::string_view msg);

}  // namespace actorcc::bootstrap
