#include "transport/tcp/listener.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "actorcc/error.hpp"
#include "common/log.hpp"
#include "transport/tcp/frame.hpp"

namespace actorcc::tcp {
namespace {

// A stranger that connects and says nothing is dropped after this, so it cannot hold a slot.
constexpr std::chrono::milliseconds kHelloTimeout{5000};

struct Pending {
  net::Fd fd;
  std::string from;  // "ip:port" for logs
  uint8_t buf[kHelloBytes] = {};
  size_t got = 0;
  Deadline deadline;
};

std::string list(const std::set<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

std::string route_source_ip(const net::SockAddr& toward) {
  // A connected UDP socket sends nothing; it only makes the kernel choose the route.
  net::Fd s(::socket(toward.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) throw SystemError(std::string("socket: ") + std::strerror(errno));
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&toward.ss), toward.len) != 0)
    throw SystemError("no route to " + toward.to_string() + ": " + std::strerror(errno));
  return net::local_address(s.get()).ip();
}

namespace {
net::Fd listen_at(const std::string& ip) {
  auto a = net::resolve(ip, 0);
  if (!a) throw InvalidArgument("TCP transport: cannot resolve listen address " + ip);
  return net::listen_on(*a);
}
}  // namespace

Listener::Listener(const std::string& ip)
    : fd_(listen_at(ip)),
      addr_(net::local_address(fd_.get())),
      gate_("actorcc TCP transport listener " + addr_.to_string()) {}

std::map<int, net::Fd> Listener::accept(const wire::Token& token, int self, int world, const std::set<int>& from,
                                        Deadline deadline, const AbortSignal* abort) {
  std::map<int, net::Fd> done;
  std::set<int> missing = from;
  std::vector<Pending> pending;
  while (!missing.empty()) {
    if (abort && abort->raised()) abort->rethrow();
    std::vector<pollfd> fds{{gate_.poll_fd(fd_.get()), POLLIN, 0}};
    for (auto& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
    int wait_ms = static_cast<int>(std::min<int64_t>(deadline.remaining().count(), 50));
    int r = ::poll(fds.data(), fds.size(), wait_ms);
    if (r < 0 && errno != EINTR) throw SystemError(std::string("poll: ") + std::strerror(errno), self);
    // The root's protections (StrangerGate): at most 64 connections without a hello (the oldest
    // goes), a back-off when descriptors run out, limited log lines. The gate sets TCP_NODELAY:
    // headers and payloads are separate writes, which Nagle would hold until the peer's delayed
    // ack (tens of ms per message).
    if (fds[0].revents & POLLIN)
      gate_.accept_all(
          fd_.get(), pending.size(),
          [&](net::Fd cfd) {
            std::string name = net::peer_name(cfd.get());
            pending.push_back({std::move(cfd), name, {}, 0, deadline.earliest(Deadline::after(kHelloTimeout))});
          },
          [&] {
            gate_.log("closed the connection from " + pending.front().from + " (no hello yet) to make room: " +
                      std::to_string(net::StrangerGate::kMaxUnauthenticated) + " connections have not said hello");
            pending.erase(pending.begin());
          });
    // Read hellos; settle each pending connection as accepted, rejected, or still waiting.
    for (size_t i = 0; i < pending.size();) {
      Pending& p = pending[i];
      std::string why;
      ssize_t k = ::recv(p.fd.get(), p.buf + p.got, kHelloBytes - p.got, 0);
      if (k > 0) p.got += static_cast<size_t>(k);
      if (k == 0) why = "closed before its hello";
      if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) why = std::strerror(errno);
      if (why.empty() && p.got < kHelloBytes && p.deadline.expired()) why = "no hello within 5 s";
      if (why.empty() && p.got < kHelloBytes) {
        ++i;
        continue;
      }
      int peer = -1;
      if (why.empty()) {
        auto h = decode_hello(p.buf, &why);
        if (h) why = check_hello(*h, token, self, world);
        if (h && why.empty()) {
          peer = h->from_rank;
          if (!missing.count(peer)) why = "rank " + std::to_string(peer) + (done.count(peer) ? " is already connected" : " is not a peer of this rank");
        }
      }
      if (why.empty()) {
        auto reply = encode(Hello{token, self, peer, world});
        auto io = net::send_all(p.fd.get(), reply.data(), reply.size(), deadline.earliest(Deadline::after(kHelloTimeout)), abort);
        if (io.status == net::IoStatus::Aborted) abort->rethrow();
        if (io.status != net::IoStatus::Ok) why = "could not answer its hello: " + io.detail;
      }
      if (why.empty()) {
        done.emplace(peer, std::move(p.fd));
        missing.erase(peer);
      } else {
        gate_.log("rejected a TCP transport connection from " + p.from + ": " + why);
      }
      pending.erase(pending.begin() + static_cast<long>(i));
    }
    if (!missing.empty() && deadline.expired())
      throw TimeoutError("TCP transport connections from rank(s) " + list(missing) +
                             " did not arrive in time (listening on " + addr_.to_string() + ")",
                         self, *missing.begin());
  }
  return done;
}

}  // namespace actorcc::tcp
