// TCP plumbing for the bootstrap: an owning fd, socket addresses, listen/connect, and
// send/recv loops that never block past a Deadline. Every socket is non-blocking and
// close-on-exec; waiting is done with poll() so a deadline (and an AbortSignal) bounds it.
#pragma once
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <chrono>
#include <optional>
#include <string>

#include "common/abort_signal.hpp"
#include "common/deadline.hpp"
#include "common/unique_fd.hpp"

namespace actorcc::net {

// The bootstrap's and the TCP transport's name for the one fd owner (common/unique_fd.hpp).
using Fd = UniqueFd;

// An IPv4 or IPv6 socket address.
struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;

  int family() const { return ss.ss_family; }
  uint16_t port() const;
  void set_port(uint16_t p);
  std::string ip() const;         // numeric, without port
  std::string to_string() const;  // "1.2.3.4:5" or "[::1]:5"
  // The wildcard address (0.0.0.0 or ::) of `family`.
  static SockAddr any(int family, uint16_t port);
};

// Resolves a host name or numeric address (IPv4 preferred); nullopt when it does not resolve.
std::optional<SockAddr> resolve(const std::string& host, uint16_t port);
// This host's name (gethostname), "" when it has none: error messages name processes by it.
std::string host_name();
// This host's first non-loopback IPv4 address that is up, if any.
std::optional<std::string> first_non_loopback_ipv4();

// Creates a listening socket bound to `addr` (SO_REUSEADDR). Throws SystemError naming the
// address (EADDRINUSE gets its own message).
Fd listen_on(const SockAddr& addr, int backlog = 128);
SockAddr local_address(int fd);
std::string peer_name(int fd);  // "ip:port" of the other end, "?" if unknown

void set_nonblocking(int fd);
void set_nodelay(int fd);

// Connects to `addr`, retrying with backoff (10 ms doubling to 500 ms) while the root is not
// up yet (connection refused, unreachable, ...), until `deadline`. Throws TimeoutError naming
// the address and the last error, or rethrows the AbortSignal if it is raised meanwhile.
// The returned socket is non-blocking with TCP_NODELAY set. `refused_for`: where a listener
// must already exist (a UniqueId.create() root listens before its id exists), refusals for
// this long in a row mean nobody will listen: RemoteError (culprit -1) then, not the deadline.
Fd connect_with_retry(const SockAddr& addr, Deadline deadline, const AbortSignal* abort, int rank,
                      std::optional<std::chrono::milliseconds> refused_for = std::nullopt);

enum class IoStatus { Ok, Closed, Timeout, Aborted };
struct IoResult {
  IoStatus status = IoStatus::Ok;
  std::string detail;  // for Closed: "connection closed" or the errno text
};

// Sends or receives exactly `n` bytes, waiting with poll() until `deadline`. `abort` (may be
// null) is checked at least every 50 ms; an Aborted result leaves the stream mid-message.
IoResult send_all(int fd, const void* data, size_t n, Deadline deadline, const AbortSignal* abort = nullptr);
IoResult recv_all(int fd, void* data, size_t n, Deadline deadline, const AbortSignal* abort = nullptr);

}  // namespace actorcc::net
