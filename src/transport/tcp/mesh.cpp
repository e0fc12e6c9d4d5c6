#include "transport/tcp/mesh.hpp"

#include <set>

#include "actorcc/error.hpp"
#include "transport/tcp/frame.hpp"
#include "transport/tcp/listener.hpp"

namespace actorcc::tcp {
namespace {

// "ip port" (ip may be IPv6, which has its own colons).
std::string encode_address(const net::SockAddr& a) { return a.ip() + " " + std::to_string(a.port()); }

net::SockAddr decode_address(const std::string& s, int rank, int self) {
  auto sp = s.rfind(' ');
  std::optional<net::SockAddr> a;
  if (sp != std::string::npos) a = net::resolve(s.substr(0, sp), static_cast<uint16_t>(std::atoi(s.c_str() + sp + 1)));
  if (!a) throw InvalidArgument("rank " + std::to_string(rank) + " sent a malformed TCP listen address", self);
  return *a;
}

// Dials `peer`, introduces this rank and checks the peer's answer.
net::Fd dial(const net::SockAddr& addr, const wire::Token& token, int self, int peer, int world, Deadline deadline,
             const AbortSignal* abort) {
  std::string where = "rank " + std::to_string(peer) + " (" + addr.to_string() + ")";
  net::Fd fd = net::connect_with_retry(addr, deadline, abort, self);
  auto hello = encode(Hello{token, self, peer, world});
  auto io = net::send_all(fd.get(), hello.data(), hello.size(), deadline, abort);
  uint8_t answer[kHelloBytes];
  if (io.status == net::IoStatus::Ok) io = net::recv_all(fd.get(), answer, sizeof(answer), deadline, abort);
  if (io.status == net::IoStatus::Aborted) abort->rethrow();
  if (io.status == net::IoStatus::Timeout)
    throw TimeoutError(where + " did not answer the TCP transport hello in time", self, peer);
  if (io.status != net::IoStatus::Ok)
    throw RemoteError(where + " closed the TCP transport connection during its hello: " + io.detail,
                      peer, self);
  std::string why;
  auto h = decode_hello(answer, &why);
  if (h) why = check_hello(*h, token, self, world);
  if (h && why.empty() && h->from_rank != peer) why = "answered as rank " + std::to_string(h->from_rank);
  if (!why.empty())
    throw RemoteError(where + " is not this group's peer: " + why, peer, self);
  return fd;
}

}  // namespace

std::unique_ptr<Mesh> Mesh::connect(Bootstrap& bs, const wire::Token& token, const net::SockAddr& toward,
                                    const std::vector<int>& peers, Deadline deadline, const AbortSignal* abort) {
  int self = bs.rank(), world = bs.world();
  std::set<int> lower, higher;
  for (int q : peers) {
    if (q < 0 || q >= world || q == self)
      throw InvalidArgument("TCP peer " + std::to_string(q) + " is not another rank of the group", self);
    (q < self ? lower : higher).insert(q);
  }
  // A rank that cannot listen still takes part in the all-gather (with an empty address), so
  // the others are not left waiting in it; everyone then names it.
  std::unique_ptr<Listener> listener;
  std::string failure;
  try {
    listener = std::make_unique<Listener>(route_source_ip(toward));
  } catch (const std::exception& e) {
    failure = e.what();
  }
  std::vector<std::string> addrs = bs.allgather(listener ? encode_address(listener->address()) : "", deadline);
  if (!listener) throw SystemError("TCP transport cannot listen: " + failure, self);
  for (int q : peers)
    if (addrs.at(q).empty())
      throw RemoteError("rank " + std::to_string(q) + " could not open its TCP transport listener", q, self);

  std::unique_ptr<Mesh> m(new Mesh(self));
  // Dial upwards first: the highest rank only accepts, so every dial is answered.
  for (int q : higher) {
    net::SockAddr a = decode_address(addrs.at(q), q, self);
    m->pairs_[q] = std::make_unique<Pair>(dial(a, token, self, q, world, deadline, abort), self, q, a.to_string());
  }
  for (auto& [q, fd] : listener->accept(token, self, world, lower, deadline, abort)) {
    std::string name = net::peer_name(fd.get());
    m->pairs_[q] = std::make_unique<Pair>(std::move(fd), self, q, name);
  }
  return m;
}

Pair& Mesh::pair(int rank) {
  auto it = pairs_.find(rank);
  if (it == pairs_.end())
    throw InvalidArgument("rank " + std::to_string(rank) + " is not a TCP peer of this rank", self_);
  return *it->second;
}

std::vector<int> Mesh::peers() const {
  std::vector<int> out;
  for (const auto& [q, p] : pairs_) out.push_back(q);
  return out;
}

}  // namespace actorcc::tcp
