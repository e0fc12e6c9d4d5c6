// Pair: one authenticated TCP connection between this rank and one peer (gloo's tcp::Pair).
// Messages are a FrameHeader then the payload, written straight from and read straight into
// the caller's memory. Every wait is bounded by the caller's Deadline and polls the group's
// AbortSignal; a failure names the peer and its address, and breaks the pair for good (its
// stream may be mid-message), so later calls fail at once with the same cause.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/socket.hpp"
#include "actorcc/error.hpp"
#include "common/abort_signal.hpp"
#include "common/deadline.hpp"
#include "group/call_desc.hpp"

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

  void send(const void* data, size_t n, uint64_t tag, Deadline deadline, const AbortSignal* abort,
            const CallDesc& call = {});
  void recv(void* data, size_t n, uint64_t tag, Deadline deadline, const AbortSignal* abort,
            const CallDesc& call = {});

 private:
  friend class Transfers;
  net::Fd fd_;
  int self_;
  int peer_;
  std::string address_;
  std::string broken_;
  int broken_code_ = 0;  // ErrorCode of the first failure
};

// One message of a batch: sent to or received from `pair`, framed with `tag` and `call` (the
// collective call it belongs to; a received frame must carry the same one).
struct Transfer {
  Pair* pair = nullptr;
  bool send = true;
  void* data = nullptr;  // read for a send, written for a recv
  size_t bytes = 0;
  uint64_t tag = 0;
  CallDesc call{};
};

// A received frame whose call, tag or length differs from what the receiver posted (the ranks
// called different collectives, sizes or types). Carries both sides, so a caller that knows
// what its tags mean can say so in its own words; the pair is broken afterwards. A differing
// call descriptor is reported first, naming both calls. culprit(): the peer.
class FrameMismatch : public InvalidArgument {
 public:
  FrameMismatch(const std::string& m, int rank, int peer, uint64_t sent_tag, uint64_t sent_bytes)
      : InvalidArgument(m, rank, peer), peer(peer), sent_tag(sent_tag), sent_bytes(sent_bytes) {}
  int peer;
  uint64_t sent_tag, sent_bytes;
};

// Runs every transfer to completion, all progressing at once under one poll (so no set of
// ranks that send to each other can wait on each other's socket buffers); transfers on the
// same pair and direction run in their order in `xs`. Errors as for exchange() below; a
// mismatched frame throws FrameMismatch.
void transfer(const std::vector<Transfer>& xs, Deadline deadline, const AbortSignal* abort);

// Sends `send_n` bytes to `to` while receiving `recv_n` bytes from `from` (either pair may be
// null; both may be the same pair), progressing both at once: two ranks that send to each
// other must not wait for each other's socket buffers to drain. Throws RemoteError (peer gone
// or garbled stream, culprit = the peer), TimeoutError (naming the peer not heard from),
// InvalidArgument (the peer sent another message than the one expected: the ranks called
// different collectives), or the AbortSignal's error.
void exchange(Pair* to, const void* send_data, size_t send_n, Pair* from, void* recv_data, size_t recv_n, uint64_t tag,
              Deadline deadline, const AbortSignal* abort, const CallDesc& call = {});

}  // namespace actorcc::tcp
