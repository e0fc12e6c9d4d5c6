// The root's challenge and a joiner's answer (bootstrap protocol 3). On every connection the
// root first sends a fresh nonce; the joiner's HELLO carries a MAC, keyed by the group's token,
// over that nonce and every HELLO field. The token itself never travels, so a HELLO captured on
// the wire (loopback included) cannot be replayed to this root or to any later group on the
// same address, and a forged field (another rank, another run id) does not verify.
#pragma once
#include <cstdint>

#include "bootstrap/wire.hpp"

namespace actorcc::bootstrap {

// The MAC a HELLO must carry for `nonce` under `token` (SipHash-2-4-128 keyed by the token).
wire::Token hello_mac(const wire::Token& token, const wire::Token& nonce, const wire::Hello& h);
// Sets h.mac for the root's `nonce`.
void sign_hello(wire::Hello& h, const wire::Token& token, const wire::Token& nonce);
// Whether h.mac is the MAC of `h` for `nonce` under `token` (compared in constant time).
bool hello_verifies(const wire::Hello& h, const wire::Token& token, const wire::Token& nonce);

// The nonces one root hands out: a keyed hash of a counter under a key drawn once from the
// kernel's entropy, so every connection gets a new one that nobody can predict, without a
// system call per stranger.
class ChallengeSource {
 public:
  ChallengeSource();
  wire::Token next();

 private:
  wire::Token key_;
  uint64_t counter_ = 0;
};

}  // namespace actorcc::bootstrap
