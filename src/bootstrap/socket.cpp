#include "bootstrap/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "actorcc/error.hpp"
#include "common/text.hpp"

namespace actorcc::net {

namespace {

std::string errno_text(int e) { return std::string(std::strerror(e)); }

// Poll slices are capped so an AbortSignal is noticed quickly even on a long deadline.
constexpr int kAbortCheckMs = 50;

int poll_timeout_ms(const Deadline& d, const AbortSignal* abort) {
  auto ms = d.remaining().count();
  if (abort) ms = std::min<int64_t>(ms, kAbortCheckMs);
  return static_cast<int>(std::min<int64_t>(ms, 1000 * 60));
}

// Waits until `fd` is ready for `events`. Returns Ok when ready (or on error/hangup, which the
// following send/recv reports precisely), Timeout or Aborted otherwise.
// Polls at least once, so an event that is already there wins over an expired deadline.
IoStatus wait_fd(int fd, short events, const Deadline& deadline, const AbortSignal* abort) {
  for (;;) {
    if (abort && abort->raised()) return IoStatus::Aborted;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, poll_timeout_ms(deadline, abort));
    if (r > 0) return IoStatus::Ok;
    if (r < 0 && errno != EINTR) return IoStatus::Ok;  // let the I/O call report the error
    if (deadline.expired()) return IoStatus::Timeout;
  }
}

}  // namespace

uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

void SockAddr::set_port(uint16_t p) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(p);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(p);
}

std::string SockAddr::ip() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
  } else {
    return "?";
  }
  return buf;
}

std::string SockAddr::to_string() const {
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "[" + std::string + ...
  std::string s;
  if (family() == AF_INET6) s += '[';
  s += ip();
  if (family() == AF_INET6) s += ']';
  s += ':';
  s += std::to_string(port());
  return s;
}

SockAddr SockAddr::any(int family, uint16_t port) {
  SockAddr a;
  if (family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.ss);
    s->sin6_family = AF_INET6;
    s->sin6_addr = in6addr_any;
    a.len = sizeof(sockaddr_in6);
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.ss);
    s->sin_family = AF_INET;
    s->sin_addr.s_addr = htonl(INADDR_ANY);
    a.len = sizeof(sockaddr_in);
  }
  a.set_port(port);
  return a;
}

std::optional<SockAddr> resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return std::nullopt;
  // Prefer IPv4: it is what every rank's default (first non-loopback IPv4) agrees on.
  const addrinfo* pick = nullptr;
  for (const addrinfo* a = res; a; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
    if (a->ai_family == AF_INET6 && !pick) pick = a;
  }
  std::optional<SockAddr> out;
  if (pick && pick->ai_addrlen <= sizeof(sockaddr_storage)) {
    SockAddr s;
    std::memcpy(&s.ss, pick->ai_addr, pick->ai_addrlen);
    s.len = pick->ai_addrlen;
    s.set_port(port);
    out = s;
  }
  ::freeaddrinfo(res);
  return out;
}

std::optional<std::string> first_non_loopback_ipv4() {
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return std::nullopt;
  std::optional<std::string> out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP)) continue;
    char buf[INET_ADDRSTRLEN] = {0};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof(buf));
    out = buf;
    break;
  }
  ::freeifaddrs(ifs);
  return out;
}

void set_nonblocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL, 0);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) throw SystemError("fcntl(O_NONBLOCK): " + errno_text(errno));
}

void set_nodelay(int fd) {
  // Control messages are small and latency-bound: do not let Nagle hold them back.
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

Fd listen_on(const SockAddr& addr, int backlog) {
  Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw SystemError("socket(): " + errno_text(errno));
  int one = 1;
  // SO_REUSEADDR lets a root restart on a port whose old connections are in TIME_WAIT; it does
  // not let two listeners share the port on Linux, so a taken port still fails below.
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0) {
    int e = errno;
    if (e == EADDRINUSE)
      throw SystemError("cannot start the actorcc root on " + addr.to_string() +
                        ": the port is already in use (another group or process holds it)");
    throw SystemError("cannot bind the actorcc root to " + addr.to_string() + ": " + errno_text(e));
  }
  if (::listen(fd.get(), backlog) != 0)
    throw SystemError("listen() on " + addr.to_string() + ": " + errno_text(errno));
  return fd;
}

SockAddr local_address(int fd) {
  SockAddr a;
  a.len = sizeof(a.ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len) != 0)
    throw SystemError("getsockname(): " + errno_text(errno));
  return a;
}

std::string peer_name(int fd) {
  SockAddr a;
  a.len = sizeof(a.ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len) != 0) return "?";
  return a.to_string();
}

Fd connect_with_retry(const SockAddr& addr, Deadline deadline, const AbortSignal* abort, int rank,
                      std::optional<std::chrono::milliseconds> refused_for) {
  using namespace std::chrono;
  auto backoff = milliseconds(10);
  std::string last_error = "no attempt made";
  std::optional<Clock::time_point> refused_since;  // start of the current run of refusals
  for (;;) {
    if (abort) abort->throw_if_raised();
    Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) throw SystemError("socket(): " + errno_text(errno), rank);
    int r;
    do {
      r = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len);
    } while (r != 0 && errno == EINTR);
    int err = r == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      // Bound one attempt by a few seconds so a dropped SYN does not eat the whole deadline.
      Deadline attempt = deadline.earliest(Deadline::after(seconds(5)));
      IoStatus st = wait_fd(fd.get(), POLLOUT, attempt, abort);
      if (st == IoStatus::Aborted) abort->rethrow();
      if (st == IoStatus::Timeout) {
        err = ETIMEDOUT;
      } else {
        socklen_t len = sizeof(err);
        if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err == 0) {
      set_nodelay(fd.get());
      return fd;
    }
    // Refused / unreachable / timed out: the root may simply not be listening yet. An attempt
    // cut short by the deadline itself says less than the error before it, so keep that one.
    if (err != ETIMEDOUT || !deadline.expired() || last_error == "no attempt made") last_error = errno_text(err);
    if (err != ECONNREFUSED) {
      refused_since.reset();
    } else if (!refused_since) {
      refused_since = Clock::now();
    } else if (refused_for && Clock::now() - *refused_since >= *refused_for) {
      throw RemoteError(cat("nothing listens at ", addr.to_string(), " (connection refused for ",
                            duration_cast<milliseconds>(Clock::now() - *refused_since).count(), " ms)"),
                        -1);  // the caller says whose root it was, and names the rank
    }
    if (deadline.expired()) break;
    auto wake = Deadline::after(backoff).earliest(deadline);
    while (!wake.expired()) {
      if (abort) abort->throw_if_raised();
      std::this_thread::sleep_for(std::min(wake.remaining(), milliseconds(kAbortCheckMs)));
    }
    backoff = std::min(backoff * 2, milliseconds(500));
  }
  throw TimeoutError("could not connect to the actorcc root at " +
                         addr.to_string() + " before the join deadline (last error: " + last_error + ")",
                     rank);
}

IoResult send_all(int fd, const void* data, size_t n, Deadline deadline, const AbortSignal* abort) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    // MSG_NOSIGNAL: a peer that vanished must give EPIPE, not kill the process with SIGPIPE.
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      IoStatus st = wait_fd(fd, POLLOUT, deadline, abort);
      if (st != IoStatus::Ok) return {st, {}};
      continue;
    }
    return {IoStatus::Closed, k < 0 ? errno_text(errno) : "connection closed"};
  }
  return {};
}

IoResult recv_all(int fd, void* data, size_t n, Deadline deadline, const AbortSignal* abort) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) return {IoStatus::Closed, "connection closed"};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      IoStatus st = wait_fd(fd, POLLIN, deadline, abort);
      if (st != IoStatus::Ok) return {st, {}};
      continue;
    }
    return {IoStatus::Closed, errno_text(errno)};
  }
  return {};
}

}  // namespace actorcc::net
