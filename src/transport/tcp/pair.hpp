// Pair: one authenticated TCP connection between this rank and one peer (gloo's tcp::Pair).
// Messages are a FrameHeader then the payload, written straight from and read straight into
// the caller's memory. Every wait is bounded by the caller's Deadline and polls the group's
// AbortSignal; a failure names the peer and its address, and breaks the pair for good (its
// stream may be mid-message), so later calls fail at once with the same cause.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "bootstrap/socket.hpp"
#include "common/abort_signal.hpp"
#include "common/deadline.hpp"

namespace actorcc::tcp {

class Pair {
 public:
  Pair(net::Fd fd, int self, int peer, std::string peer_address);
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;

  int self() const { return self_; }
  int peer() const { return peer_; }
  const std::string& peer_address() const { return address_; }
  int fd() const { return fd_.get(); }
  // The first failure of this pair ("" while it works).
  const std::string& broken() const { return broken_; }

  void send(const void* data, size_t n, uint64_t tag, Deadline deadline, const AbortSignal* abort);
  void recv(void* data, size_t n, uint64_t tag, Deadline deadline, const AbortSignal* abort);

 private:
  friend class Exchange;
  net::Fd fd_;
  int self_;
  int peer_;
  std::string address_;
  std::string broken_;
  int broken_code_ = 0;  // ErrorCode of the first failure
};

// Sends `send_n` bytes to `to` while receiving `recv_n` bytes from `from` (either pair may be
// null; both may be the same pair), progressing both at once: two ranks that send to each
// other must not wait for each other's socket buffers to drain. Throws RemoteError (peer gone
// or garbled stream, culprit = the peer), TimeoutError (naming the peer not heard from),
// InvalidArgument (the peer sent another message than the one expected: the ranks called
// different collectives), or the AbortSignal's error.
void exchange(Pair* to, const void* send_data, size_t send_n, Pair* from, void* recv_data, size_t recv_n, uint64_t tag,
              Deadline deadline, const AbortSignal* abort);

}  // namespace actorcc::tcp
