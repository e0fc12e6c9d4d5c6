// Elastic membership's steps (elastic.hpp): the successor reservation, the peer-blob record that
// publishes it, shrink's plan and its failure text, grow's id and its agreement.
#include "core/elastic.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

#include "bootstrap/id_fields.hpp"
#include "bootstrap/siphash.hpp"
#include "common/log.hpp"
#include "transport/tcp/listener.hpp"

namespace actorcc::elastic {

namespace {

constexpr char kMagic[4] = {'A', 'C', 'E', 'L'};

void put(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
}

// Reads what wrap() wrote; false on a malformed blob.
struct Reader {
  const std::string& s;
  size_t at = 0;
  bool ok = true;
  uint64_t get(int bytes) {
    if (at + bytes > s.size()) {
      ok = false;
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(s[at + i])) << (8 * i);
    at += bytes;
    return v;
  }
  std::string take(size_t n) {
    if (at + n > s.size()) {
      ok = false;
      return {};
    }
    std::string r = s.substr(at, n);
    at += n;
    return r;
  }
};

std::string list_text(const std::vector<int>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os.str();
}

// FNV-1a of the survivor list: the same list on every survivor gives the same digest.
uint64_t digest_of(const std::vector<int>& survivors) {
  uint64_t h = 1469598103934665603ull;
  for (int r : survivors)
    for (int i = 0; i < 4; ++i) h = (h ^ static_cast<uint8_t>(r >> (8 * i))) * 1099511628211ull;
  return h | 1;  // never 0, which means "no membership digest"
}

}  // namespace

std::unique_ptr<Member> Member::reserve(const UniqueId& id, uint64_t digest) {
  auto m = std::make_unique<Member>();
  m->digest_ = digest;
  m->mine_.token = bootstrap::random_token();
  // The interface that reaches the group's root reaches its ranks too (they all reached it).
  // Without a socket (no route, no port, no descriptor left) the group still forms: only a shrink
  // this rank would host fails, naming it (port 0 says so).
  try {
    const std::string ip = tcp::route_source_ip(bootstrap::read_id(id).root);
    auto addr = net::resolve(ip, 0);
    if (!addr) throw SystemError("cannot resolve " + ip);
    m->listener_ = net::listen_on(*addr);
    m->mine_.ip = ip;
    m->mine_.port = net::local_address(m->listener_.get()).port();
  } catch (const Error& e) {
    LOG_WARN("actorcc: no successor socket for this rank (a shrink it would host will fail): " << e.what());
  }
  return m;
}

std::string Member::wrap(const std::string& topology_blob) const {
  std::string s(kMagic, 4);
  put(s, topology_blob.size(), 4);
  s += topology_blob;
  put(s, mine_.ip.size(), 1);
  s += mine_.ip;
  put(s, mine_.port, 2);
  s.append(reinterpret_cast<const char*>(mine_.token.data()), mine_.token.size());
  put(s, digest_, 8);
  return s;
}

std::vector<std::string> Member::unwrap_all(const std::vector<std::string>& blobs, int rank) {
  std::vector<std::string> topo;
  std::vector<int> differ;
  successors_.clear();
  for (size_t r = 0; r < blobs.size(); ++r) {
    Reader in{blobs[r]};
    const bool magic = in.take(4) == std::string(kMagic, 4);
    std::string t = in.take(in.get(4));
    Successor s;
    s.ip = in.take(in.get(1));
    s.port = static_cast<uint16_t>(in.get(2));
    const std::string tok = in.take(s.token.size());
    const uint64_t digest = in.get(8);
    if (!magic || !in.ok || in.at != blobs[r].size())
      // Whoever held the token sent it: that rank's fault, named by every rank alike (as a
      // descriptor that does not decode, core/communicator.cpp).
      throw RemoteError("rank " + std::to_string(r) +
                            " joined with a peer descriptor this rank cannot read (malformed peer info: its "
                            "membership wrapper does not parse): not an actorcc rank of this version",
                        static_cast<int>(r), rank);
    std::memcpy(s.token.data(), tok.data(), s.token.size());
    if (digest != digest_) differ.push_back(static_cast<int>(r));
    topo.push_back(std::move(t));
    successors_.push_back(std::move(s));
  }
  if (!differ.empty())
    throw InvalidArgument("the ranks of this group were formed by different shrink calls: rank(s) " + list_text(differ) +
                              " passed another exclude list than rank " + std::to_string(rank) +
                              " (every survivor must pass the same one)",
                          rank, differ.front());
  return topo;
}

ShrinkPlan plan_shrink(Member& m, int rank, int world, const std::vector<int>& exclude) {
  ShrinkPlan p;
  std::vector<int> ex = exclude;
  std::sort(ex.begin(), ex.end());
  ex.erase(std::unique(ex.begin(), ex.end()), ex.end());
  p.what = "shrink(exclude=[" + list_text(ex) + "])";
  for (int r : ex)
    if (r < 0 || r >= world)
      throw InvalidArgument(p.what + ": rank " + std::to_string(r) + " is outside the group of " + std::to_string(world),
                            rank);
  if (std::binary_search(ex.begin(), ex.end(), rank))
    throw InvalidArgument(p.what + ": rank " + std::to_string(rank) +
                              " is in the exclude list, so it is not a member of the shrunk group (an excluded rank "
                              "closes this communicator instead)",
                          rank);
  if (m.used)
    throw InvalidArgument(p.what + ": this communicator was shrunk already; shrink the communicator that shrink "
                              "returned",
                          rank);
  if (static_cast<int>(m.successors().size()) != world)
    throw Error(ErrorCode::Internal, p.what + ": no successor table", rank);
  for (int r = 0; r < world; ++r)
    if (!std::binary_search(ex.begin(), ex.end(), r)) p.survivors.push_back(r);
  p.new_rank = static_cast<int>(std::find(p.survivors.begin(), p.survivors.end(), rank) - p.survivors.begin());
  p.digest = digest_of(p.survivors);

  // The new group's id: the lowest survivor's reserved address, a token only members of this
  // group can compute (keyed by that rank's successor secret) and that names the survivor list,
  // and the world size. A root serving another list on that address (a failed attempt's root that
  // has not ended yet, or a group formed by another exclude list) refuses this token instead of
  // admitting the rank into the wrong group (join_shrunk retries until the deadline).
  const Successor& host = m.successors()[p.survivors.front()];
  const int new_world = static_cast<int>(p.survivors.size());
  if (host.port == 0)
    throw UnsupportedError(p.what + ": rank " + std::to_string(p.survivors.front()) +
                               ", the lowest survivor, could not reserve a successor socket when the group formed (its "
                               "log says why), so it cannot host the shrunk group",
                           rank);
  bootstrap::IdFields f;
  auto addr = net::resolve(host.ip, host.port);
  if (!addr) throw SystemError(p.what + ": cannot resolve rank " + std::to_string(p.survivors.front()) + "'s address " + host.ip, rank);
  f.root = *addr;
  f.rank0_hosts = true;
  f.world = new_world;
  f.token = bootstrap::siphash128(host.token, "actorcc shrink\n" + list_text(p.survivors));
  p.id = bootstrap::make_id(f);
  if (p.new_rank == 0) {
    // A duplicate of the reserved socket: a failed attempt's root closes only its copy, and a
    // second attempt serves on the same address.
    const int fd = ::fcntl(m.listener(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throw SystemError(p.what + ": dup of the successor listener: " + std::strerror(errno), rank);
    p.root = std::make_unique<bootstrap::RootServer>(net::Fd(fd), f.token, new_world);
  }
  return p;
}

void finish_shrink(Member& m, ShrinkPlan& p) {
  m.used = true;
  if (p.root) bootstrap::keep_root(std::move(p.root));
}

void join_shrunk(const ShrinkPlan& p, int rank, std::chrono::milliseconds join_timeout,
                 const std::function<void(std::chrono::milliseconds)>& join) {
  const Deadline until = Deadline::after(join_timeout);
  bool refused = false;  // a root of another survivor list answered on the address
  auto other_list = [&](const Error& last) {
    rethrow_shrink_failure(p, InvalidArgument("until the join timeout, the address of rank " +
                                                  std::to_string(p.survivors.front()) +
                                                  " served only a group of another survivor list (another exclude "
                                                  "list: is this rank excluded by the others?); last: " +
                                                  last.message(),
                                              rank),
                           rank);
  };
  for (;;) {
    try {
      join(std::max(until.remaining(), std::chrono::milliseconds(1)));
      return;
    } catch (const InvalidArgument& e) {
      // The root's refusal of a token it does not serve (root_admission.cpp): another shrink's
      // root holds the address for now.
      if (std::string(e.what()).find("wrong token") == std::string::npos) rethrow_shrink_failure(p, e, rank);
      refused = true;
      if (until.expired()) other_list(e);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } catch (const Error& e) {
      // After a refusal, that root going away is no news: the list differs.
      if (refused) other_list(e);
      rethrow_shrink_failure(p, e, rank);
    }
  }
}

[[noreturn]] void rethrow_shrink_failure(const ShrinkPlan& p, const Error& e, int rank) {
  int culprit = e.culprit();
  // A lost or silent root (-1 in a Remote or Timeout error): its host, the lowest survivor.
  const bool root_gone = e.code() == ErrorCode::Remote || e.code() == ErrorCode::Timeout;
  if (culprit < 0 && root_gone && p.new_rank != 0) culprit = 0;
  std::string said = e.message();
  const std::string opening = "rank " + std::to_string(rank) + ": ";
  if (said.rfind(opening, 0) == 0) said = said.substr(opening.size());  // the new error says it again
  std::string text = p.what + " failed: " + said;
  int old = -1;
  if (culprit >= 0 && culprit < static_cast<int>(p.survivors.size())) {
    old = p.survivors[culprit];
    text += " (rank " + std::to_string(culprit) + " of the shrunk group is rank " + std::to_string(old) +
            " of this group; shrink again without it)";
  }
  switch (e.code()) {
    case ErrorCode::Remote: throw RemoteError(text, old, rank);
    case ErrorCode::Timeout: throw TimeoutError(text, rank, old);
    case ErrorCode::InvalidArgument: throw InvalidArgument(text, rank, old);
    default: throw Error(e.code(), text, rank, old);
  }
}

std::string revoke_reason(const ShrinkPlan& p) {
  return "revoked by " + p.what + ": the group goes on as rank(s) " + list_text(p.survivors) +
         " in a new communicator, without the excluded rank(s)";
}

UniqueId grow_id(const Member& m) { return UniqueId::create(m.mine().ip); }

std::pair<UniqueId, int> agree_grow(Bootstrap& bs, int rank, int world, int new_world, const std::optional<UniqueId>& id,
                                    int new_rank, Deadline deadline) {
  // First, before anything is sized by it (a vector of new_world entries below: 8 GiB for
  // grow(2**31 - 1)). Every grow passes here: the C++ and Python calls, ncclCommGrow's ranks.
  if (new_world < 1 || new_world > wire::kMaxWorld)
    throw InvalidArgument("grow(" + std::to_string(new_world) + "): a group holds 1.." +
                              std::to_string(wire::kMaxWorld) + " ranks",
                          rank);
  if (new_rank < 0) new_rank = rank;
  if (new_world < world || new_rank >= new_world)
    throw InvalidArgument("grow(" + std::to_string(new_world) + "): the grown group must hold the " +
                              std::to_string(world) + " current ranks and new rank " + std::to_string(new_rank),
                          rank);
  std::string blob;
  put(blob, static_cast<uint32_t>(new_world), 4);
  put(blob, static_cast<uint32_t>(new_rank), 4);
  if (id) blob.append(reinterpret_cast<const char*>(id->bytes.data()), id->bytes.size());
  const auto all = bs.allgather(blob, deadline);
  std::optional<UniqueId> chosen;
  int from = -1;
  std::vector<int> taken(new_world, -1);
  for (int r = 0; r < world; ++r) {
    Reader in{all[r]};
    const int w = static_cast<int>(in.get(4)), nr = static_cast<int>(in.get(4));
    if (w != new_world)
      throw InvalidArgument("grow: rank " + std::to_string(r) + " grows to " + std::to_string(w) + " ranks, rank " +
                                std::to_string(rank) + " to " + std::to_string(new_world),
                            rank, r);
    if (nr < 0 || nr >= new_world || taken[nr] >= 0)
      throw InvalidArgument("grow: rank " + std::to_string(r) + " asks for new rank " + std::to_string(nr) +
                                (nr >= 0 && nr < new_world ? ", which rank " + std::to_string(taken[nr]) + " takes too"
                                                           : ", outside the grown group"),
                            rank, r);
    taken[nr] = r;
    if (all[r].size() == 8 + UniqueId::kBytes) {
      UniqueId u;
      std::memcpy(u.bytes.data(), all[r].data() + 8, UniqueId::kBytes);
      if (chosen && !(u == *chosen))
        throw InvalidArgument("grow: ranks " + std::to_string(from) + " and " + std::to_string(r) +
                                  " passed different ids",
                              rank, r);
      if (!chosen) {
        chosen = u;
        from = r;
      }
    }
  }
  if (!chosen)
    throw InvalidArgument("grow: no rank passed the grown group's id (one rank makes it with grow_id() and passes it; "
                          "the others may pass none)",
                          rank);
  return {*chosen, new_rank};
}

}  // namespace actorcc::elastic
