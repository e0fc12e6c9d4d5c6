// The ways a root comes to exist: UniqueId::create / start_root (random token, this process
// hosts it) and the from_address path (every rank derives the same id; rank 0 hosts it).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <unistd.h>

#include <mutex>
#include <variant>

#include "actorcc/error.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/frame_io.hpp"
#include "bootstrap/greeting.hpp"
#include "bootstrap/hello_auth.hpp"
#include "bootstrap/id_fields.hpp"
#include "bootstrap/root.hpp"
#include "bootstrap/siphash.hpp"
#include "common/log.hpp"
#include "common/env.hpp"
#include "common/text.hpp"

namespace actorcc {

namespace {

net::SockAddr resolve_or_throw(const std::string& host, uint16_t port) {
  auto a = net::resolve(host, port);
  if (!a) throw InvalidArgument("cannot resolve the actorcc root host '" + host + "'");
  return *a;
}

bool is_loopback(const net::SockAddr& a) {
  if (a.family() == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr.s_addr) >> 24) == 127;
  return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr);
}

// The from_address token: a keyed hash of (host, port, world) under the launcher's secret, so
// every rank computes the same token and nobody without the secret can. The secret is folded
// into the key with the same PRF (a fixed public key), which keeps its whole entropy.
wire::Token address_token(const std::string& secret, const std::string& host, uint16_t port, int world) {
  const bootstrap::SipKey domain{'a', 'c', 't', 'o', 'r', 'c', 'c', '-', 's', 'e', 'c', 'r', 'e', 't', 0, 1};
  const bootstrap::SipKey key = bootstrap::siphash128(domain, secret);
  const std::string what = cat("actorcc from_address", '\0', host, '\0', port, '\0', world);
  return bootstrap::siphash128(key, what);
}

}  // namespace

UniqueId start_root(const std::string& host, uint16_t port, bool creator_is_rank0) {
  std::string advertised = host;
  if (advertised.empty()) {
    // setting: ACTORCC_SOCKET_ADDR - address other ranks use to reach a root this process hosts (default: first non-loopback IPv4, else 127.0.0.1)
    if (auto v = env::get("ACTORCC_SOCKET_ADDR"))
      advertised = *v;
    else
      advertised = net::first_non_loopback_ipv4().value_or("127.0.0.1");
  }
  net::SockAddr addr = resolve_or_throw(advertised, port);
  // Listen on exactly the advertised address, never the wildcard: a root asked for 127.0.0.1
  // must not be reachable from other hosts.
  net::Fd listener = net::listen_on(addr);
  addr.set_port(net::local_address(listener.get()).port());

  bootstrap::IdFields f;
  f.root = addr;
  f.token = bootstrap::random_token();
  f.creator_is_rank0 = creator_is_rank0;
  bootstrap::launch_root(std::move(listener), f.token);
  return bootstrap::make_id(f);
}

UniqueId address_unique_id(const std::string& host, uint16_t port, int world) {
  if (port == 0) throw InvalidArgument("from_address needs a fixed port, got 0");
  if (world <= 0) throw InvalidArgument(cat("from_address: world size ", world, " is not positive"));
  bootstrap::IdFields f;
  f.root = resolve_or_throw(host, port);
  f.rank0_hosts = true;
  f.world = world;
  // setting: ACTORCC_BOOTSTRAP_SECRET - shared secret of a from_address group, the same on every rank; needed unless the address is loopback (default: none)
  std::string secret = env::get("ACTORCC_BOOTSTRAP_SECRET").value_or("");
  if (secret.empty()) {
    if (!is_loopback(f.root))
      throw InvalidArgument(cat("from_address(", host, ":", port,
                                "): a group reachable from other hosts needs a shared secret, or anyone who knows the "
                                "address could join it: set ACTORCC_BOOTSTRAP_SECRET to the same random string on "
                                "every rank (e.g. python -c 'import secrets; print(secrets.token_hex(16))'), or use "
                                "UniqueId.create(), whose id carries a random token"));
    // Loopback needs no secret (docs/reliability.md): a warning there, on every rank of every job
    // (the doctor's included), said nothing the user must act on. A note once per process, for
    // whoever looks; off loopback the missing secret is the error above.
    static std::once_flag noted;
    std::call_once(noted, [&] {
      LOG_INFO("actorcc from_address(" << host << ":" << port << ") without ACTORCC_BOOTSTRAP_SECRET: loopback "
               "only, and any local user who knows the port can join; set the secret to authenticate the group");
    });
  }
  f.token = address_token(secret, host, port, world);
  return bootstrap::make_id(f);
}

namespace {

// Another listener holds the id's address. If it is this group's kind of root (the token
// verifies: the same address, world and secret), ranks of this launch may be joining it as if it
// were ours, so it is told (a HELLO flagged kHelloSecondRoot) and poisons its group; its answer,
// or what answered instead, is returned for this rank 0's error.
std::string report_to_holder(const bootstrap::IdFields& f) {
  constexpr auto kProbe = std::chrono::milliseconds(2000);
  const Deadline by = Deadline::after(kProbe);
  try {
    auto g = bootstrap::greet(f.root, {by, by, true, std::chrono::milliseconds(0), {}}, nullptr, 0);
    if (!g)
      return cat("what holds it sent nothing within ", kProbe.count() / 1000,
                 " s: it is not an actorcc root (another program holds the port?)");
    const bootstrap::RunId run = bootstrap::launcher_run_id();
    wire::Hello h;
    h.rank = 0;
    h.world = f.world;
    h.join_timeout_ms = static_cast<uint64_t>(kProbe.count());
    h.pid = static_cast<uint32_t>(::getpid());
    h.flags = wire::kHelloSecondRoot;
    h.host = net::host_name();
    h.run_id = run.value;
    h.run_id_from = run.source;
    bootstrap::sign_hello(h, f.token, g->nonce);
    if (wire::send_message(g->fd.get(), h, by).status != net::IoStatus::Ok)
      return "an actorcc root holds it, and closed the connection";
    wire::Received in = wire::recv_message(g->fd.get(), by);
    if (in.io.status != net::IoStatus::Ok) return "an actorcc root holds it, and gave no answer";
    if (auto* r = std::get_if<wire::Reject>(&*in.msg)) return "the actorcc root there answered: " + r->reason;
    if (auto* p = std::get_if<wire::PeerLost>(&*in.msg)) return "the actorcc root there answered: " + p->reason;
    if (auto* j = std::get_if<wire::JoinFailed>(&*in.msg)) return "the actorcc root there answered: " + j->reason;
    return "an actorcc root holds it";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

void start_root_for(const UniqueId& id) {
  bootstrap::IdFields f = bootstrap::read_id(id);
  if (!f.rank0_hosts) throw InvalidArgument("start_root_for() needs an id made by address_unique_id()");
  // Exactly the address the ranks were given: a loopback group stays unreachable from outside,
  // and a stranger cannot reach the root through an interface nobody asked for.
  net::Fd listener;
  try {
    listener = net::listen_on(f.root);
  } catch (const SystemError& e) {
    // listen_on's EADDRINUSE: a second root for the address is a conflict the holder must learn.
    if (e.message().find("already in use") == std::string::npos) throw;
    throw SystemError(e.message() + "; " + report_to_holder(f));
  }
  bootstrap::launch_root(std::move(listener), f.token, f.world, bootstrap::launcher_run_id());
}

}  // namespace actorcc
