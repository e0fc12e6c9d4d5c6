// Elastic membership's steps (elastic.hpp): the successor reservation, the peer-blob record that
// publishes it, shrink's plan and its failure text, grow's id and its agreement.
#include "core/elastic.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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
  m->mine_.hosts_root = bootstrap::hosts_root(bootstrap::read_id(id).token);
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
  put(s, mine_.hosts_root ? 1 : 0, 1);
  return s;
}

int Member::root_host() const {
  for (size_t r = 0; r < successors_.size(); ++r)
    if (successors_[r].hosts_root) return static_cast<int>(r);
  return -1;
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
    const uint64_t hosts = in.get(1);
    s.hosts_root = hosts == 1;
    if (!magic || !in.ok || in.at != blobs[r].size() || hosts > 1)
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

ShrinkPlan plan_shrink(Member& m, int rank, int world, const std::vector<int>& exclude,
                       const std::vector<int>& lost) {
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
  // Ranks killed together: the caller's list may hold only the first (its error's culprit);
  // the root knows the others. Every survivor hears of every loss within milliseconds, so they
  // reach the same list; one that has not yet is refused by the new root (another token) and
  // retries, and a loss heard after this point ends the join naming the rank (join_shrunk).
  std::vector<int> also;
  for (int r : lost)
    if (r >= 0 && r < world && r != rank && !std::binary_search(ex.begin(), ex.end(), r)) also.push_back(r);
  if (!also.empty()) {
    p.what += " (and rank(s) " + list_text(also) + ", which this group's root reported lost)";
    LOG_INFO("rank " << rank << ": " << p.what);
    ex.insert(ex.end(), also.begin(), also.end());
    std::sort(ex.begin(), ex.end());
  }
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

namespace {

// The new rank of old rank `old` in the plan, -1 if it is no survivor.
int new_rank_of(const ShrinkPlan& p, int old) {
  auto it = std::lower_bound(p.survivors.begin(), p.survivors.end(), old);
  return it != p.survivors.end() && *it == old ? static_cast<int>(it - p.survivors.begin()) : -1;
}

// The lowest survivor of the plan (other than this rank) that this group's root reported lost,
// waiting up to `grace` for the news: -1 if none. A failed join whose new root vanished is most
// often the root's host giving up because another survivor died (its own news of the loss came
// first): that survivor is the cause, and it is the host only when the host itself is lost.
int lost_survivor(const ShrinkPlan& p, const AbortSignal& old, std::chrono::milliseconds grace) {
  const Deadline until = Deadline::after(grace);
  for (;;) {
    for (int r : old.lost())
      if (const int k = new_rank_of(p, r); k >= 0 && k != p.new_rank) return r;
    if (until.expired()) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// How long a join that lost its new root, or another survivor, waits for this group's news of a
// lost survivor before blaming that rank (the old root, when it is alive, reports a death within
// milliseconds).
constexpr std::chrono::milliseconds kLossNewsGrace(500);

}  // namespace

void join_shrunk(const ShrinkPlan& p, int rank, std::chrono::milliseconds join_timeout, AbortSignal& old,
                 const std::function<void(std::chrono::milliseconds, std::shared_ptr<AbortSignal>)>& join) {
  const Deadline until = Deadline::after(join_timeout);
  bool refused = false;  // a root of another survivor list answered on the address
  auto fail = [&](const Error& e) { rethrow_shrink_failure(p, e, rank, old.lost()); };
  auto other_list = [&](const Error& last) {
    fail(InvalidArgument("until the join timeout, the address of rank " + std::to_string(p.survivors.front()) +
                             " served only a group of another survivor list (another exclude list: is this rank "
                             "excluded by the others?); last: " +
                             last.message(),
                         rank));
  };
  // A failure explained by a survivor this group lost: named as that survivor's loss.
  auto lost_cause = [&](const Error& e, std::chrono::milliseconds grace) {
    const int r = lost_survivor(p, old, grace);
    if (r < 0) return;
    const int k = new_rank_of(p, r);
    fail(RemoteError("rank " + std::to_string(k) + " was lost before the shrunk group formed (this group's root "
                         "reported it; the join ended: " + e.message() + ")",
                     k, p.new_rank));
  };
  for (;;) {
    auto sig = std::make_shared<AbortSignal>(p.new_rank);
    auto watched = std::make_shared<std::atomic<bool>>(false);  // the watch below ended the join
    try {
      // A survivor that died before joining would be waited for until the join timeout (nobody
      // else can tell the new root about it); this group's root saw its connection drop.
      AbortSignal::LossWatch watch(old, [&p, sig, watched](int r, const std::string& why) {
        const int k = new_rank_of(p, r);
        if (k < 0 || k == p.new_rank) return;
        watched->store(true);
        sig->raise_lost(k, "rank " + std::to_string(k) + " was lost before the shrunk group formed: " + why);
      });
      join(std::max(until.remaining(), std::chrono::milliseconds(1)), sig);
      return;
    } catch (const InvalidArgument& e) {
      // The root's refusal of a token it does not serve (root_admission.cpp): another shrink's
      // root holds the address for now.
      if (std::string(e.what()).find("wrong token") == std::string::npos) fail(e);
      refused = true;
      lost_cause(e, std::chrono::milliseconds(0));  // the other list excludes a rank lost since
      if (until.expired()) other_list(e);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } catch (const Error& e) {
      // A survivor that heard of a loss sooner leaves the attempt to replan, and its goodbye (or,
      // from the host, its root's end) can reach this rank before this rank's own news: the
      // error then names a living rank. The loss is the cause, and a survivor list without it
      // is what every survivor reaches.
      if (watched->load()) {
        lost_cause(e, std::chrono::milliseconds(0));
        fail(e);
      }
      // A vanished new root, or another survivor gone from the forming group: wait a moment for
      // the news of who died.
      const bool remote = e.code() == ErrorCode::Remote;
      const bool root_gone = remote && (e.culprit() < 0 || e.culprit() == 0);
      const bool survivor_left = remote && e.culprit() > 0 && e.culprit() != p.new_rank &&
                                 e.culprit() < static_cast<int>(p.survivors.size());
      lost_cause(e, (root_gone && p.new_rank != 0) || survivor_left ? kLossNewsGrace : std::chrono::milliseconds(0));
      // The host's failed attempt (its root ends as the host replans) may have accepted this
      // attempt's connection before it ended: a reset before any answer, not the host's death,
      // which this group's root would have reported by now (lost_cause). Again, as a refusal.
      if (root_gone && p.new_rank != 0 && std::string(e.what()).find("(while joining)") != std::string::npos &&
          !until.expired()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      // After a refusal, that root going away is no news: the list differs.
      if (refused) other_list(e);
      fail(e);
    }
  }
}

[[noreturn]] void rethrow_shrink_failure(const ShrinkPlan& p, const Error& e, int rank, const std::vector<int>& lost) {
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
  // culprits(): the culprit and this group's losses. Not the failed group's other losses:
  // survivors leaving a failed attempt are no dead ranks.
  switch (e.code()) {
    case ErrorCode::Remote: throw_with_culprits(RemoteError(text, old, rank), lost);
    case ErrorCode::Timeout: throw_with_culprits(TimeoutError(text, rank, old), lost);
    case ErrorCode::InvalidArgument: throw_with_culprits(InvalidArgument(text, rank, old), lost);
    default: throw_with_culprits(Error(e.code(), text, rank, old), lost);
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
