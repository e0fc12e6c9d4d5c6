#include "bootstrap/hello_auth.hpp"

#include <string>

#include "bootstrap/id_fields.hpp"
#include "bootstrap/siphash.hpp"

namespace actorcc::bootstrap {

wire::Token hello_mac(const wire::Token& token, const wire::Token& nonce, const wire::Hello& h) {
  // The domain string keeps this MAC from ever equalling another use of the same key.
  std::string msg("actorcc hello 3");
  msg.push_back('\0');
  msg.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  msg += wire::hello_signed_part(h);
  return siphash128(token, msg);
}

void sign_hello(wire::Hello& h, const wire::Token& token, const wire::Token& nonce) {
  h.mac = hello_mac(token, nonce, h);
}

bool hello_verifies(const wire::Hello& h, const wire::Token& token, const wire::Token& nonce) {
  const wire::Token want = hello_mac(token, nonce, h);
  uint8_t d = 0;
  for (size_t i = 0; i < want.size(); ++i) d |= static_cast<uint8_t>(want[i] ^ h.mac[i]);
  return d == 0;
}

ChallengeSource::ChallengeSource() : key_(random_token()) {}

wire::Token ChallengeSource::next() {
  const uint64_t n = counter_++;
  std::string msg("actorcc challenge");
  for (int i = 0; i < 8; ++i) msg.push_back(static_cast<char>(n >> (8 * i)));
  return siphash128(key_, msg);
}

}  // namespace actorcc::bootstrap
