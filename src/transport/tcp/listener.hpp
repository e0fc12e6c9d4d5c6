// Listener: the socket a rank's peers connect to (gloo's tcp::Listener). It hands out a
// connection only after the peer's Hello proved it belongs to the group (token), is
// addressed to this rank and comes from a rank that is expected and not yet connected.
// Anything else is closed after at most one Hello's worth of bytes, and logged (with the
// root's protections against strangers: bootstrap/stranger_gate.hpp).
#pragma once
#include <map>
#include <set>
#include <string>

#include "bootstrap/socket.hpp"
#include "bootstrap/stranger_gate.hpp"
#include "bootstrap/wire.hpp"
#include "common/abort_signal.hpp"
#include "common/deadline.hpp"

namespace actorcc::tcp {

// The local address this host would use to reach `toward` (the bootstrap root): the
// interface peers can reach this rank on, without a setting, on one host and across nodes.
std::string route_source_ip(const net::SockAddr& toward);

class Listener {
 public:
  // Listens on `ip`, on a port the kernel picks.
  explicit Listener(const std::string& ip);
  const net::SockAddr& address() const { return addr_; }

  // Accepts one authenticated connection from each rank in `from`, answering each with this
  // rank's Hello. Throws TimeoutError naming the ranks that did not connect by `deadline`.
  std::map<int, net::Fd> accept(const wire::Token& token, int self, int world, const std::set<int>& from,
                                Deadline deadline, const AbortSignal* abort);

 private:
  net::Fd fd_;
  net::SockAddr addr_;
  net::StrangerGate gate_;
};

}  // namespace actorcc::tcp
