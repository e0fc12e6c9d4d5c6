// What a UniqueId holds, and its byte layout (little-endian, the rest zero):
//
//   [0,4)    magic "ACID"           [4,6)   protocol version u16
//   [6]      address family 4 | 6   [7]     flags (bit 0: rank 0 hosts the root, from_address;
//                                             bit 1: the creator runs rank 0, create())
//   [8,10)   root port u16          [10,12) zero
//   [12,28)  root address (IPv4 uses the first 4 bytes)
//   [28,44)  128-bit token          [44,48) world i32 (address ids only, else 0)
//   [48,128) zero
#pragma once
#include <cstdint>
#include <string>

#include "actorcc/unique_id.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"

namespace actorcc::bootstrap {

struct IdFields {
  uint16_t version = static_cast<uint16_t>(wire::kProtocolVersion);
  net::SockAddr root;      // where ranks connect
  wire::Token token{};
  bool rank0_hosts = false;  // from_address path: the root lives in rank 0's process
  // create() by the process that will be rank 0 (the torch backend's rank 0): a lost root is
  // then rank 0's death, named as such. No effect on how the group forms.
  bool creator_is_rank0 = false;
  int32_t world = 0;
};

UniqueId make_id(const IdFields& f);
// Validates magic, family, flags and that every byte no field uses is zero (ids are canonical:
// one group, one byte string); throws InvalidArgument naming what is wrong.
// The protocol version is returned as found (join() checks it).
IdFields read_id(const UniqueId& id);

// A fresh random token (std::random_device reads the kernel's entropy source).
wire::Token random_token();

}  // namespace actorcc::bootstrap
