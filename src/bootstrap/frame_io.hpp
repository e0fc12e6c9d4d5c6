// Sending and receiving whole bootstrap frames on a socket, bounded by a Deadline. Used by
// the client side (join handshake, reader thread); the root uses FrameDecoder on its
// non-blocking poll loop instead.
#pragma once
#include <optional>
#include <string>

#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"

namespace actorcc::wire {

net::IoResult send_message(int fd, const Message& m, Deadline deadline, const AbortSignal* abort = nullptr);

struct Received {
  net::IoResult io;                // Ok: `msg` holds the message
  std::optional<Message> msg;
};
// Reads one frame. A malformed frame throws WireError (the stream cannot be resynchronised).
Received recv_message(int fd, Deadline deadline, const AbortSignal* abort = nullptr);

}  // namespace actorcc::wire
