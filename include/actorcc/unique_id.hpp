// UniqueId: the 128-byte token that lets ranks find and authenticate the group's root.
// Like ncclUniqueId it is opaque, fixed-size and trivially copyable; unlike it, it carries a
// 128-bit random token that the root checks on every join, and a printable form.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace actorcc {

struct UniqueId {
  static constexpr size_t kBytes = 128;
  std::array<uint8_t, kBytes> bytes{};

  // Creates an id and starts the group's root (a TCP listener thread) in this process, which
  // hosts it for the group's whole life: if the process ends, every rank's pending and later
  // calls fail at once (RemoteError, "lost the connection to the actorcc root"). `host` chooses
  // the address peers connect to (default: ACTORCC_SOCKET_ADDR, else this host's first
  // non-loopback IPv4, else 127.0.0.1) and the root listens on exactly that address; `port` 0
  // picks a free one (docs/reliability.md, "The root-lifetime contract").
  // `creator_is_rank0`: this process will be rank 0 of the group (as in the torch backend), so a
  // lost root is reported as rank 0's death, rank 0 named as the culprit.
  static UniqueId create(const std::string& host = "", uint16_t port = 0, bool creator_is_rank0 = false);

  // Stops the root that create() started in this process for this id, if no rank has joined
  // it yet: its thread ends and its port and descriptors close. Returns false (and does
  // nothing) when the root is in use, already gone, or not in this process. The Python
  // binding calls it when an id that never left the process (not pickled, printed or turned
  // into bytes) is dropped.
  bool stop_root_if_unused() const;

  // Printable form (hex, 256 chars) and its inverse; parse() throws InvalidArgument.
  std::string to_string() const;
  static UniqueId parse(const std::string& text);
  // The id whose bytes are data[0, n): throws InvalidArgument saying what is wrong where they
  // are not a whole id (the length, a corrupt field), as parse() does for the printable form.
  static UniqueId from_bytes(const void* data, size_t n);

  bool operator==(const UniqueId&) const = default;
};
static_assert(sizeof(UniqueId) == UniqueId::kBytes, "UniqueId must stay 128 bytes");

}  // namespace actorcc
