// The ways a root comes to exist: UniqueId::create / start_root (random token, this process
// hosts it) and the from_address path (every rank derives the same id; rank 0 hosts it).
#include <sys/socket.h>

#include "actorcc/error.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/id_fields.hpp"
#include "bootstrap/root.hpp"
#include "common/env.hpp"

namespace actorcc {

namespace {

net::SockAddr resolve_or_throw(const std::string& host, uint16_t port) {
  auto a = net::resolve(host, port);
  if (!a) throw InvalidArgument("cannot resolve the actorcc root host '" + host + "'");
  return *a;
}

// FNV-1a over the bytes, then a splitmix64 finaliser to spread the bits. Not secret: the
// from_address token only has to be equal on every rank and differ between groups, so that a
// rank of another group (or a stale job) on the same port is refused.
uint64_t mix_hash(const std::string& s, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

}  // namespace

UniqueId start_root(const std::string& host, uint16_t port) {
  std::string advertised = host;
  if (advertised.empty()) {
    // setting: ACTORCC_SOCKET_ADDR - address other ranks use to reach a root this process hosts (default: first non-loopback IPv4, else 127.0.0.1)
    if (auto v = env::get("ACTORCC_SOCKET_ADDR"))
      advertised = *v;
    else
      advertised = net::first_non_loopback_ipv4().value_or("127.0.0.1");
  }
  net::SockAddr addr = resolve_or_throw(advertised, port);
  // An explicit host binds only that address; a defaulted one listens everywhere so that the
  // advertised address (perhaps chosen by a guess) is certainly among those served.
  net::SockAddr bind_addr = host.empty() ? net::SockAddr::any(addr.family(), port) : addr;
  net::Fd listener = net::listen_on(bind_addr);
  addr.set_port(net::local_address(listener.get()).port());

  bootstrap::IdFields f;
  f.root = addr;
  f.token = bootstrap::random_token();
  bootstrap::launch_root(std::move(listener), f.token);
  return bootstrap::make_id(f);
}

UniqueId address_unique_id(const std::string& host, uint16_t port, int world) {
  if (port == 0) throw InvalidArgument("from_address needs a fixed port, got 0");
  if (world <= 0) throw InvalidArgument("from_address: world size " + std::to_string(world) + " is not positive");
  bootstrap::IdFields f;
  f.root = resolve_or_throw(host, port);
  f.rank0_hosts = true;
  f.world = world;
  std::string key = std::string("actorcc") + '\0' + host + '\0' + std::to_string(port) + '\0' + std::to_string(world);
  uint64_t a = mix_hash(key, 0xcbf29ce484222325ULL), b = mix_hash(key, 0x84222325cbf29ce4ULL);
  for (int i = 0; i < 8; ++i) {
    f.token[i] = static_cast<uint8_t>(a >> (8 * i));
    f.token[8 + i] = static_cast<uint8_t>(b >> (8 * i));
  }
  return bootstrap::make_id(f);
}

void start_root_for(const UniqueId& id) {
  bootstrap::IdFields f = bootstrap::read_id(id);
  if (!f.rank0_hosts) throw InvalidArgument("start_root_for() needs an id made by address_unique_id()");
  // Listen on every address: `host` names this machine as the others see it, which need not
  // be an address we can bind (NAT, a name resolving elsewhere).
  net::Fd listener = net::listen_on(net::SockAddr::any(f.root.family(), f.root.port()));
  bootstrap::launch_root(std::move(listener), f.token);
}

}  // namespace actorcc
