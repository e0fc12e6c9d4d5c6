// Communicator: joins the bootstrap, learns the topology, agrees on a backend with every other
// rank, then validates each call before handing it to the backend.
#include "actorcc/communicator.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iomanip>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include <unistd.h>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/outcomes.hpp"
#include "common/env.hpp"
#include "common/fork_generation.hpp"
#include "common/log.hpp"
#include "backends/backend.hpp"
#include "core/elastic.hpp"
#include "core/validate.hpp"
#include "group/call_desc.hpp"
#include "topology/topology.hpp"

namespace actorcc {

const char* version() noexcept { return ACTORCC_VERSION; }

namespace {

// A short name for the group: FNV-1a of the whole id, so shm segments and sockets of different
// groups never collide and nobody outside the group can guess them from the address alone.
std::string group_tag_of(const UniqueId& id) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : id.bytes) h = (h ^ b) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  return os.str();
}

// One rank's attempt at a setup step: empty on success, else why and the error's code.
struct Attempt {
  std::string error;
  ErrorCode code = ErrorCode::Internal;
  int culprit = -1;  // the rank the error names as at fault, when it names one
};

// Every rank's verdict on a setup step: "\n  rank r: why" for every rank that failed, the first
// of them (the culprit) and its error's code (a full /dev/shm is a System error on that rank
// wherever it is reported). Every rank gets the same verdict (Outcomes), so all ranks take the
// same next step and none waits in a collective alone.
struct Verdict {
  std::string text;
  int culprit = -1;
  ErrorCode code = ErrorCode::Unsupported;
  bool ok() const { return text.empty(); }
  [[noreturn]] void raise(const std::string& what, int rank) const { throw Error(code, what + text, rank, culprit); }
};

Verdict failed_ranks(Bootstrap& bs, Deadline dl, const Attempt& mine) {
  // The status word carries the code and the culprit: "fail<code>:<culprit>".
  auto o = Outcomes::gather(bs,
                            mine.error.empty() ? "ok"
                                               : "fail" + std::to_string(static_cast<int>(mine.code)) + ":" +
                                                     std::to_string(mine.culprit),
                            mine.error, dl);
  Verdict v;
  if (o.all_ok()) return v;
  v.text = "\n  " + o.reasons("", "\n  ");
  const int first = o.ranks().front();
  const std::string& st = o.status(first);
  int code = 0, culprit = -1;
  if (std::sscanf(st.c_str(), "fail%d:%d", &code, &culprit) < 1) code = 0;
  if (code >= static_cast<int>(ErrorCode::Internal) && code <= static_cast<int>(ErrorCode::Unsupported))
    v.code = static_cast<ErrorCode>(code);
  v.culprit = culprit >= 0 && culprit < o.world() ? culprit : first;
  return v;
}

// How a GPU group that spans nodes is served: "hier" (default) or "flat". A group decision:
// rank 0's value holds for every rank (a rank that read another one says so), since ranks
// that took different backends would wait for each other in setups that never meet.
std::string multinode_shape(Bootstrap& bs, int rank, Deadline dl) {
  // setting: ACTORCC_MULTINODE - hier|flat: GPU groups across nodes use the hierarchical backend or one flat NCCL communicator over all ranks (default hier; rank 0's value holds)
  std::string mine = env::get("ACTORCC_MULTINODE").value_or("hier");
  if (mine != "hier" && mine != "flat") {
    LOG_WARN("rank " << rank << ": ACTORCC_MULTINODE=" << mine << " is neither hier nor flat; using hier");
    mine = "hier";
  }
  const auto all = bs.allgather(mine, dl);
  if (all[0] != mine) LOG_WARN("rank " << rank << ": ACTORCC_MULTINODE=" << mine << " here, " << all[0] << " on rank 0: using rank 0's");
  return all[0];
}

// The first step of suspend() and resume(): every rank's call and state ("<call>:<state>"),
// all-gathered, so ranks that disagree fail together: a rank that suspends while another
// resumes (their all-gathers pair up) makes both fail, naming the other. Returns the outcomes,
// whose status is "<call>:ok" where all is well.
Outcomes agree_step(Bootstrap& bs, const std::string& call, const std::string& state, const std::string& why,
                    int rank, Deadline dl) {
  auto all = Outcomes::gather(bs, call + ":" + state, why, dl);
  std::vector<int> other;
  std::string theirs;
  for (int r = 0; r < all.world(); ++r)
    if (!all.status(r).starts_with(call + ":")) {
      other.push_back(r);
      theirs = all.status(r).substr(0, all.status(r).find(':'));
    }
  if (!other.empty())
    throw UnsupportedError(call + ": rank(s) " + rank_list(other) + " called " + theirs + " at the same time " +
                               "(suspend and resume are collective: every rank makes the same call)",
                           rank, other.front());
  return all;
}

template <typename Make>
Attempt try_make(Bootstrap& bs, std::unique_ptr<BackendImpl>& out, Make&& make) {
  try {
    out = make();
    return {};
  } catch (const TimeoutError& e) {
    // A setup step timed out: some rank never arrived (stopped, or stuck), so gathering the
    // outcomes would only time out again. The first rank to time out knows who is missing; a
    // later one would also list the ranks that gave up meanwhile. So it ends the group with its
    // cause, and the others' setup waits raise that at once.
    out.reset();
    bs.abort(e.what(), e.culprit());
    throw;
  } catch (const Error& e) {
    out.reset();
    return {Outcomes::reason(e), e.code(), e.culprit()};
  } catch (const std::exception& e) {
    out.reset();
    return {Outcomes::reason(e), ErrorCode::Internal};
  }
}

}  // namespace

struct Communicator::Impl {
  std::shared_ptr<AbortSignal> abort;
  std::unique_ptr<Bootstrap> bootstrap;
  std::unique_ptr<elastic::Member> member;  // this rank's successor reservation (core/elastic.hpp)
  GroupContext ctx;
  std::unique_ptr<BackendImpl> backend;
  // Collective calls issued (validated and handed to the backend), and for each rank that
  // closed its communicator, how many it had issued: every collective call past that count
  // needs a rank that is gone. Written by calls and by the bootstrap's reader thread.
  std::atomic<uint64_t> collectives{0};
  std::mutex left_mu;
  std::vector<std::optional<uint64_t>> left_after;
  // The process that built this communicator. A fork() child inherits the object, the
  // sockets and the shm mappings, but not the threads that serve them; the connections are
  // the parent's: a byte the child sends, or a socket it shuts down, is the parent's rank
  // speaking (a peer would take the child's all_reduce for the parent's and return wrong
  // data, or read the child's goodbye as the parent leaving). So the child may not use it,
  // and its teardown leaves everything to the parent (NCCL: comms are unusable after fork).
  const pid_t creator = ::getpid();
  const uint32_t generation = fork_generation();  // what in_creator() compares, per call

  bool in_creator() const noexcept { return fork_generation() == generation; }
  void check_process() const {
    if (in_creator()) return;
    throw UnsupportedError("this communicator was created by process " + std::to_string(creator) +
                               " and cannot be used from process " + std::to_string(::getpid()) +
                               " (a fork() child): its connections belong to the parent, which stays the rank; "
                               "build a new communicator in the child instead",
                           ctx.rank, ctx.rank);
  }

  ~Impl() {
    if (!in_creator()) {
      // A fork child: no BYE, no shutdown() of the parent's sockets, no unlink, no join of
      // threads that exist only in the parent. The kernel closes the child's copies of the
      // descriptors at exit, which the parent's keep open.
      (void)backend.release();
      (void)bootstrap.release();
      return;
    }
    backend.reset();  // backends may still use the bootstrap while tearing down
    if (bootstrap) {
      bootstrap->set_collectives(collectives.load());
      bootstrap.reset();  // says goodbye to the root (and stops the departure listener)
    }
  }

  static std::string left_text(int who, uint64_t after, uint64_t call) {
    return "rank " + std::to_string(who) + " closed the communicator after " + std::to_string(after) +
           " collective call(s); this rank's collective call " + std::to_string(call) + " needs it";
  }

  // The reader thread's news of a clean leave. A collective this rank has already issued past
  // the leaver's count (a GPU kernel waiting for it, a CPU call in its wait) can never finish:
  // the group's abort ends it now, naming the leaver, instead of its timeout. Calls issued
  // later fail in enter(). The counter's seq_cst order against enter()'s makes one of the two
  // see the other.
  void on_departure(const Bootstrap::Departure& d) {
    if (d.rank < 0 || d.rank >= ctx.world) return;
    {
      std::lock_guard<std::mutex> g(left_mu);
      left_after[d.rank] = d.collectives;
    }
    const uint64_t issued = collectives.load();
    if (issued > d.collectives)
      abort->raise(d.rank, ErrorCode::Remote, left_text(d.rank, d.collectives, d.collectives + 1));
  }

  // Counts a collective call and refuses one that needs a rank that has left (every later
  // collective does). Refused here, not aborted: every rank refuses the same calls by the same
  // rule, and an abort would also cut short the point-to-point calls still running between
  // the others, which may go on; a call to or from the leaver fails the same way.
  void enter(const CollArgs& a) {
    if (!is_point_to_point(a.coll)) {
      const uint64_t k = collectives.fetch_add(1) + 1;
      std::lock_guard<std::mutex> g(left_mu);
      for (int r = 0; r < ctx.world; ++r)
        if (left_after[r] && k > *left_after[r])
          throw RemoteError(left_text(r, *left_after[r], k), r, ctx.rank);
      return;
    }
    std::lock_guard<std::mutex> g(left_mu);
    auto refuse_peer = [&](int peer) {
      if (peer >= 0 && peer < ctx.world && left_after[peer])
        throw RemoteError("rank " + std::to_string(peer) + " closed the communicator; a " +
                              std::string(to_string(a.coll)) + " with it cannot complete",
                          peer, ctx.rank);
    };
    if (a.coll != Collective::SendRecv) return refuse_peer(a.peer);
    for (size_t i = 0; i < a.num_ops; ++i) refuse_peer(a.ops[i].peer);
  }

  // Communicator::suspend: set and cleared on every rank together (after the same verdicts).
  std::atomic<bool> suspended{false};

  void check_usable() const {
    check_process();
    abort->throw_if_raised();
    refuse_if_suspended();
  }
  // A call while suspended has no memory to run in. Refused on this rank alone, without an
  // abort: every rank of a suspended group is suspended (suspend() is collective), so no peer
  // waits inside the call, and the group goes on after resume().
  void refuse_if_suspended() const {
    if (suspended.load())
      throw UnsupportedError("the communicator is suspended (suspend() released its memory): call resume() on every "
                             "rank before any other call",
                             ctx.rank);
  }

  // The options of a group made from this one (shrink, grow): the same backend kind and device.
  Options next_options(std::chrono::milliseconds join_timeout) const {
    Options o = ctx.options;
    o.backend = backend->kind();
    if (join_timeout.count() > 0) o.join_timeout = join_timeout;
    return o;
  }

  // The end of a shrink, once the new group has formed (so no survivor is still in a call of
  // this one): this group's later calls fail with `why`. `tell_group` (the new group's rank 0):
  // also through the root, if it is still there, so that excluded ranks still alive learn it.
  void revoke(const std::string& why, bool tell_group) {
    if (abort->raised()) return;  // aborted already: its calls fail with the first cause
    if (tell_group) bootstrap->abort(why);
    else abort->raise(ctx.rank, ErrorCode::Remote, why);
  }

  // Checked mode: every rank compares the call's descriptor with every other rank's over the
  // bootstrap, whatever the backend (the protocols' own always-on check: group/call_desc.hpp).
  // Point-to-point calls involve only their peers, so they are matched by the transfer
  // itself (the receiver checks every message's count and dtype; the NCCL path swaps
  // summaries in checked mode), never here. all_to_all_v's counts differ per rank by design:
  // each rank appends its send and receive counts, and every rank checks every pair, so a
  // disagreement fails on every rank, naming both, before any data moves.
  void check_matching(const CollArgs& a) {
    if (is_point_to_point(a.coll)) return;
    std::string blob = CallDesc::of(a).text();
    if (a.coll == Collective::AllToAllV) {
      blob += '\n';
      for (int k = 0; k < ctx.world; ++k) blob += std::to_string(a.send_counts[k]) + " " + std::to_string(a.recv_counts[k]) + " ";
    }
    auto all = bootstrap->allgather(blob, Deadline::after(ctx.options.timeout));
    const auto desc = [](const std::string& b) { return b.substr(0, b.find('\n')); };  // without the counts
    std::vector<std::pair<int, std::string>> calls;
    for (size_t r = 0; r < all.size(); ++r) calls.emplace_back(static_cast<int>(r), desc(all[r]));
    if (std::any_of(calls.begin(), calls.end(), [&](const auto& c) { return c.second != calls[0].second; })) {
      // Every rank has every call: all name the same culprit, the rank off the majority.
      const MismatchVerdict v = mismatch_verdict(std::move(calls));
      throw InvalidArgument("mismatched collectives (checked mode): " + v.text, ctx.rank, v.culprit);
    }
    std::vector<std::vector<size_t>> sends(all.size()), recvs(all.size());
    for (size_t r = 0; r < all.size(); ++r) {
      if (a.coll != Collective::AllToAllV) continue;
      std::istringstream is(all[r].substr(all[r].find('\n') + 1));
      sends[r].resize(ctx.world);
      recvs[r].resize(ctx.world);
      for (int k = 0; k < ctx.world; ++k) is >> sends[r][k] >> recvs[r][k];
    }
    if (a.coll != Collective::AllToAllV) return;
    for (int r = 0; r < ctx.world; ++r)
      for (int k = 0; k < ctx.world; ++k)
        if (sends[r][k] != recvs[k][r])
          throw InvalidArgument("all_to_all_v counts disagree (checked mode): rank " +
                                    std::to_string(r) + " sends " + std::to_string(sends[r][k]) + " elements to rank " +
                                    std::to_string(k) + ", which expects " + std::to_string(recvs[k][r]) + " from it",
                                ctx.rank);
  }

  // A group of one has nobody waiting in the call, so it stays usable; otherwise the others'
  // call sequence has diverged from this rank's, and only an abort ends their wait in bounded
  // time with the real cause (rather than a timeout that names this rank without the reason).
  [[noreturn]] void refuse(const InvalidArgument& e) {
    check_process();
    if (ctx.world > 1) ctx.abort_group("it refused a call with a bad argument: " + e.message(), e.culprit());
    throw e;
  }

  // Every InvalidArgument of a call is refused: the core's checks, checked mode's mismatch and
  // the backend's own (the CUDA backend checks where memory lives).
  void run(const CollArgs& a) {
    check_usable();  // a call while suspended is refused before anything else
    try {
      validate_args(a, ctx.rank, ctx.world);
      if (ctx.options.checked) check_matching(a);
      enter(a);
      backend->run(a);
    } catch (const InvalidArgument& e) {
      refuse(e);
    }
  }
};

namespace {

// The AbortSignals of the communicators being constructed in this process, for
// interrupt_constructions().
struct Constructions {
  std::mutex mu;
  std::vector<AbortSignal*> signals;
  static Constructions& instance() {
    static Constructions c;
    return c;
  }
};

class ConstructionScope {
 public:
  explicit ConstructionScope(AbortSignal* s) : s_(s) {
    auto& c = Constructions::instance();
    std::lock_guard<std::mutex> g(c.mu);
    c.signals.push_back(s_);
  }
  ~ConstructionScope() {
    auto& c = Constructions::instance();
    std::lock_guard<std::mutex> g(c.mu);
    std::erase(c.signals, s_);
  }
  ConstructionScope(const ConstructionScope&) = delete;
  ConstructionScope& operator=(const ConstructionScope&) = delete;

 private:
  AbortSignal* s_;
};

// What a rank settles on its own before it joins: its settings, its device and its identity.
// The device is chosen before joining so the peer table carries every rank's GPU identity.
struct LocalSetup {
  Options opt;
  int device = -1;
  PeerInfo self;
  std::chrono::steady_clock::time_point begun, done;  // for the ready line's "local" span
};

LocalSetup prepare(const UniqueId& id, int rank, int world, const Options& user_options) {
  if (world < 1 || world > wire::kMaxWorld)
    throw InvalidArgument("world_size must be in 1.." + std::to_string(wire::kMaxWorld) + ", got " +
                              std::to_string(world),
                          rank);
  if (rank < 0 || rank >= world)
    throw InvalidArgument("rank " + std::to_string(rank) + " is outside the group of " + std::to_string(world), rank);
  Bootstrap::check_join(id, rank, world);
  LocalSetup l;
  l.begun = std::chrono::steady_clock::now();
  l.opt = options_from_env(user_options);
  if (l.opt.backend != Backend::Cpu) l.device = cuda_resolve_device(l.opt.device);
  if (l.opt.backend == Backend::Cuda && l.device < 0)
    throw UnsupportedError("backend 'cuda' requested but no CUDA device is usable here", rank);
  l.self = topology::local_peer_info(rank, l.device);
  l.done = std::chrono::steady_clock::now();
  return l;
}

std::unique_ptr<Communicator::Impl> build_impl(const UniqueId& id, int rank, int world, const LocalSetup& local,
                                               std::unique_ptr<Communicator::Impl>& impl, uint64_t digest);

// `digest`: the membership a shrunk group was formed for (core/elastic.hpp), 0 otherwise.
// `abort`: the new communicator's signal when the caller made it (a shrink, which watches the
// old group's losses meanwhile), else a fresh one.
std::unique_ptr<Communicator::Impl> build(const UniqueId& id, int rank, int world, const Options& user_options,
                                          uint64_t digest = 0, std::shared_ptr<AbortSignal> abort = nullptr) {
  // Everything local first; a mistake found there goes to the group's root before it is raised
  // here, so the other ranks fail at once, naming this rank and the mistake, instead of waiting
  // out the join timeout for a rank that will never come.
  LocalSetup local;
  try {
    local = prepare(id, rank, world, user_options);
  } catch (const Error& e) {
    Communicator::refuse_join(id, rank, world, e.message(), user_options.join_timeout);
    throw;
  }
  auto impl = std::make_unique<Communicator::Impl>();
  impl->abort = abort ? std::move(abort) : std::make_shared<AbortSignal>(rank);
  ConstructionScope scope(impl->abort.get());
  try {
    return build_impl(id, rank, world, local, impl, digest);
  } catch (...) {
    // Interrupted after joining: the others learn it from the root now, naming this rank (its
    // goodbye alone would read as a clean leave, or a rank lost while forming).
    if (impl && impl->bootstrap && impl->abort->raised() &&
        impl->abort->reason().starts_with("rank " + std::to_string(rank) + " was interrupted"))
      impl->bootstrap->abort(impl->abort->reason(), rank);
    throw;
  }
}

std::unique_ptr<Communicator::Impl> build_impl(const UniqueId& id, int rank, int world, const LocalSetup& local,
                                               std::unique_ptr<Communicator::Impl>& impl, uint64_t digest) {
  using Ms = std::chrono::duration<double, std::milli>;
  const auto t_begin = local.begun, t_local = local.done;
  const Options& opt = local.opt;
  const int device = local.device;
  const PeerInfo& self = local.self;
  impl->member = elastic::Member::reserve(id, digest);
  impl->bootstrap = Bootstrap::join(id, rank, world, impl->member->wrap(topology::encode(self)),
                                    Deadline::after(opt.join_timeout), impl->abort);
  const auto t_joined = std::chrono::steady_clock::now();

  GroupContext& ctx = impl->ctx;
  ctx.rank = rank;
  ctx.world = world;
  ctx.options = opt;
  // A blob comes from whoever held the token; one that does not decode is that rank's fault,
  // and every rank finds the same, so every rank names it.
  for (const auto& blob : impl->member->unwrap_all(impl->bootstrap->peer_blobs(), rank)) {
    const int from = static_cast<int>(ctx.peers.size());
    try {
      ctx.peers.push_back(topology::decode(blob));
    } catch (const Error& e) {
      throw RemoteError("rank " + std::to_string(from) + " joined with a peer descriptor this rank cannot read (" +
                            e.message() + "): not an actorcc rank of this version",
                        from, rank);
    }
  }
  for (int r = 0; r < world; ++r)
    if (ctx.peers[r].rank != r)
      throw RemoteError("rank " + std::to_string(r) + " joined with a peer descriptor for rank " +
                            std::to_string(ctx.peers[r].rank) + ": not an actorcc rank of this version",
                        r, rank);
  ctx.num_nodes = topology::assign_nodes(ctx.peers);
  for (const auto& p : ctx.peers)
    if (p.node == ctx.peers[rank].node) ctx.local_ranks.push_back(p.rank);
  ctx.local_index = ctx.peers[rank].local_rank;
  ctx.group_tag = group_tag_of(id);
  ctx.id = id;
  ctx.bootstrap = impl->bootstrap.get();
  ctx.abort = impl->abort;
  if (const int host = impl->member->root_host(); host >= 0) impl->bootstrap->set_root_host(host);
  impl->left_after.assign(world, std::nullopt);
  Communicator::Impl* self_impl = impl.get();  // the bootstrap (and its reader thread) goes before *impl's members
  impl->bootstrap->on_departure([self_impl](const Bootstrap::Departure& d) { self_impl->on_departure(d); });

  // Backend choice is a group decision: Auto means CUDA only if every rank has a GPU.
  std::vector<int> no_gpu;
  for (const auto& p : ctx.peers)
    if (p.gpu_uuid.empty()) no_gpu.push_back(p.rank);
  Backend kind = opt.backend;
  if (kind == Backend::Auto) kind = no_gpu.empty() ? Backend::Cuda : Backend::Cpu;
  if (kind == Backend::Cuda && !no_gpu.empty())
    throw UnsupportedError("backend 'cuda' needs a GPU on every rank; rank(s) " +
                               rank_list(no_gpu) + " have none",
                           rank);
  ctx.options.device = kind == Backend::Cuda ? device : -1;

  Deadline setup = Deadline::after(opt.join_timeout);
  Bootstrap& bs = *impl->bootstrap;
  auto& backend = impl->backend;
  if (kind == Backend::Cpu) {
    auto bad = failed_ranks(bs, setup, try_make(bs, backend, [&] { return make_cpu_backend(ctx); }));
    if (!bad.ok()) bad.raise("CPU backend setup failed on ", rank);
  } else {
    // Across nodes: the hierarchical backend (the CUDA backend inside each node, NCCL rails
    // between), or one flat NCCL communicator when asked for (the baseline the bench compares).
    // Inside one node: the CUDA backend. Either way, GPUs that cannot map each other's memory
    // (no P2P, VMM import refused) fall back to flat NCCL, never slower.
    const bool flat = ctx.num_nodes > 1 && multinode_shape(bs, rank, setup) == "flat";
    const std::string where = ctx.num_nodes > 1 ? "the group spans " + std::to_string(ctx.num_nodes) + " nodes" : "";
    Verdict bad;
    if (flat) {
      bad = failed_ranks(bs, setup, try_make(bs, backend, [&] {
        return make_nccl_backend(ctx, where + " and ACTORCC_MULTINODE=flat asks for one NCCL communicator");
      }));
      if (!bad.ok()) bad.raise("NCCL setup for a multi-node group failed on ", rank);
    } else {
      const char* name = ctx.num_nodes > 1 ? "hierarchical GPU" : "CUDA";
      bad = failed_ranks(bs, setup, try_make(bs, backend, [&] {
        return ctx.num_nodes > 1 ? make_gpu_hier_backend(ctx) : make_cuda_backend(ctx);
      }));
      if (!bad.ok()) {
        // NCCL refuses a GPU used by two ranks too (only on those ranks; the others then wait in
        // its setup until the sharers' abort ends it: tests/python/test_gpu_nccl_setup.py), so
        // there is no fallback to try.
        if (topology::shared_gpu(ctx.peers).first >= 0) bad.raise(std::string(name) + " backend setup failed on ", rank);
        std::string why = (where.empty() ? "" : where + "; ") + "the NVLink/VMM path is unavailable:" + bad.text;
        backend.reset();
        auto bad2 = failed_ranks(bs, setup, try_make(bs, backend, [&] { return make_nccl_backend(ctx, why); }));
        if (!bad2.ok())
          bad2.raise(std::string(name) + " backend setup failed on " + bad.text + "\nand the NCCL fallback failed on ",
                     rank);
      }
    }
  }
  // Where a slow start went: this process's GPU and identity, the join (which holds the wait
  // for the last rank to arrive), the backend's setup.
  const auto t_ready = std::chrono::steady_clock::now();
  LOG_INFO("rank " << rank << "/" << world << " ready: backend " << to_string(kind) << ", " << ctx.num_nodes
                   << " node(s), local rank " << ctx.local_index << " of " << ctx.local_ranks.size() << "; in " << std::fixed << std::setprecision(1)
                   << Ms(t_ready - t_begin).count() << " ms: local " << Ms(t_local - t_begin).count() << ", join "
                   << Ms(t_joined - t_local).count() << ", setup " << Ms(t_ready - t_joined).count());
  return std::move(impl);
}

}  // namespace

void interrupt_constructions(const std::string& reason) {
  auto& c = Constructions::instance();
  std::lock_guard<std::mutex> g(c.mu);
  for (AbortSignal* s : c.signals)
    s->raise(s->self_rank(), ErrorCode::Remote, "rank " + std::to_string(s->self_rank()) + " was interrupted: " + reason);
}

Communicator::Communicator(const UniqueId& id, int rank, int world_size, const Options& options)
    : impl_(build(id, rank, world_size, options)) {}

std::unique_ptr<Communicator> Communicator::from_address(const std::string& host, uint16_t port, int rank,
                                                         int world_size, const Options& options) {
  UniqueId id = address_unique_id(host, port, world_size);
  if (rank == 0) start_root_for(id);
  return std::make_unique<Communicator>(id, rank, world_size, options);
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

void Communicator::refuse_join(const UniqueId& id, int rank, int world_size, const std::string& reason,
                               std::chrono::milliseconds join_timeout) noexcept {
  Bootstrap::refuse(id, rank, world_size, reason, Deadline::after(join_timeout));
}

Communicator::~Communicator() = default;

std::unique_ptr<Communicator> Communicator::shrink(const std::vector<int>& exclude, std::chrono::milliseconds join_timeout) {
  Impl& me = *impl_;
  // The ranks this group's root reported lost are excluded too: never waited for.
  elastic::ShrinkPlan p = elastic::plan_shrink(*me.member, me.ctx.rank, me.ctx.world, exclude, me.abort->lost());
  std::unique_ptr<Impl> next;
  Options o = me.next_options(join_timeout);
  elastic::join_shrunk(p, me.ctx.rank, o.join_timeout, *me.abort,
                       [&](std::chrono::milliseconds left, std::shared_ptr<AbortSignal> sig) {
                         o.join_timeout = left;
                         next = build(p.id, p.new_rank, static_cast<int>(p.survivors.size()), o, p.digest,
                                      std::move(sig));
                       });
  elastic::finish_shrink(*me.member, p);
  me.revoke(elastic::revoke_reason(p), p.new_rank == 0);
  return std::unique_ptr<Communicator>(new Communicator(std::move(next)));
}

UniqueId Communicator::grow_id() const { return elastic::grow_id(*impl_->member); }

std::unique_ptr<Communicator> Communicator::grow(int new_world, const std::optional<UniqueId>& id, int new_rank,
                                                 std::chrono::milliseconds join_timeout) {
  Impl& me = *impl_;
  me.check_usable();
  auto [gid, r] = elastic::agree_grow(*me.bootstrap, me.ctx.rank, me.ctx.world, new_world, id, new_rank,
                                      Deadline::after(me.ctx.options.timeout));
  return std::unique_ptr<Communicator>(new Communicator(build(gid, r, new_world, me.next_options(join_timeout))));
}

int Communicator::rank() const noexcept { return impl_->ctx.rank; }
int Communicator::world_size() const noexcept { return impl_->ctx.world; }
Backend Communicator::backend() const noexcept { return impl_->backend->kind(); }
int Communicator::device() const noexcept { return impl_->backend->device(); }
const std::vector<PeerInfo>& Communicator::peers() const noexcept { return impl_->ctx.peers; }
int Communicator::num_nodes() const noexcept { return impl_->ctx.num_nodes; }

void Communicator::all_reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op, Stream stream) {
  impl_->run({Collective::AllReduce, send, recv, count, dtype, op, 0, stream});
}
void Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dtype, RedOp op,
                                  Stream stream) {
  impl_->run({Collective::ReduceScatter, send, recv, recv_count, dtype, op, 0, stream});
}
void Communicator::all_gather(const void* send, void* recv, size_t send_count, DataType dtype, Stream stream) {
  impl_->run({Collective::AllGather, send, recv, send_count, dtype, RedOp::Sum, 0, stream});
}
void Communicator::broadcast(const void* send, void* recv, size_t count, DataType dtype, int root, Stream stream) {
  impl_->run({Collective::Broadcast, send, recv, count, dtype, RedOp::Sum, root, stream});
}
void Communicator::barrier(Stream stream) {
  impl_->run({Collective::Barrier, nullptr, nullptr, 0, DataType::Float32, RedOp::Sum, 0, stream});
}

void Communicator::send(const void* buf, size_t count, DataType dtype, int peer, Stream stream) {
  CollArgs a{Collective::Send, buf, nullptr, count, dtype, RedOp::Sum, 0, stream};
  a.peer = peer;
  impl_->run(a);
}
void Communicator::recv(void* buf, size_t count, DataType dtype, int peer, Stream stream) {
  CollArgs a{Collective::Recv, nullptr, buf, count, dtype, RedOp::Sum, 0, stream};
  a.peer = peer;
  impl_->run(a);
}
void Communicator::send_recv(const std::vector<P2POp>& ops, Stream stream) {
  CollArgs a{Collective::SendRecv, nullptr, nullptr, 0, DataType::Float32, RedOp::Sum, 0, stream};
  a.ops = ops.data();
  a.num_ops = ops.size();
  impl_->run(a);
}
void Communicator::all_to_all(const void* send, void* recv, size_t count, DataType dtype, Stream stream) {
  impl_->run({Collective::AllToAll, send, recv, count, dtype, RedOp::Sum, 0, stream});
}
void Communicator::all_to_all_v(const void* send, const std::vector<size_t>& send_counts, void* recv,
                                const std::vector<size_t>& recv_counts, DataType dtype, Stream stream) {
  const auto w = static_cast<size_t>(world_size());
  if (send_counts.size() != w || recv_counts.size() != w)
    refuse_call(InvalidArgument("all_to_all_v: send_counts has " +
                              std::to_string(send_counts.size()) + " entries and recv_counts " +
                              std::to_string(recv_counts.size()) + "; both need world_size = " + std::to_string(w),
                          rank()));
  CollArgs a{Collective::AllToAllV, send, recv, 0, dtype, RedOp::Sum, 0, stream};
  a.send_counts = send_counts.data();
  a.recv_counts = recv_counts.data();
  impl_->run(a);
}
void Communicator::reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op, int root,
                          Stream stream) {
  impl_->run({Collective::Reduce, send, recv, count, dtype, op, root, stream});
}
void Communicator::gather(const void* send, void* recv, size_t send_count, DataType dtype, int root, Stream stream) {
  impl_->run({Collective::Gather, send, recv, send_count, dtype, RedOp::Sum, root, stream});
}
void Communicator::scatter(const void* send, void* recv, size_t recv_count, DataType dtype, int root, Stream stream) {
  impl_->run({Collective::Scatter, send, recv, recv_count, dtype, RedOp::Sum, root, stream});
}

void Communicator::register_buffer(void* ptr, size_t bytes) {
  impl_->check_usable();
  if (!ptr || bytes == 0) throw InvalidArgument("register_buffer: null pointer or zero size", rank());
  impl_->backend->register_buffer(ptr, bytes);
}
void Communicator::deregister_buffer(void* ptr) {
  impl_->check_process();
  impl_->refuse_if_suspended();
  impl_->backend->deregister_buffer(ptr);
}

std::vector<std::string> Communicator::allgather_bytes(const std::string& blob) {
  impl_->check_usable();
  return impl_->bootstrap->allgather(blob, Deadline::after(impl_->ctx.options.timeout));
}
void Communicator::host_barrier() {
  impl_->check_usable();
  impl_->bootstrap->barrier(Deadline::after(impl_->ctx.options.timeout));
}

// While suspended nothing is queued: both report the group's state alone (a watchdog that polls,
// as torch's does through ncclCommGetAsyncError, must not read the suspension as an error).
void Communicator::check() {
  impl_->check_process();
  if (impl_->suspended.load()) return impl_->abort->throw_if_raised();
  impl_->backend->poll_errors();
  impl_->check_usable();
}
void Communicator::synchronize(Stream stream) {
  impl_->check_process();
  if (impl_->suspended.load()) return impl_->abort->throw_if_raised();
  impl_->backend->synchronize(stream);
  impl_->check_usable();
}

// Three all-gathered steps, so every rank takes the same branch whatever failed where: every
// rank's state and quiesce (no rank releases while a peer's kernel may still write into its
// workspace), the release, its verdict.
void Communicator::suspend() {
  Impl& me = *impl_;
  me.check_process();
  me.abort->throw_if_raised();
  const int rank = me.ctx.rank;
  if (!me.backend->can_suspend()) {
    const std::string which = me.ctx.num_nodes > 1
                                  ? "the backend of a group across " + std::to_string(me.ctx.num_nodes) + " nodes"
                                  : "the " + std::string(to_string(me.backend->kind())) + " backend";
    throw UnsupportedError("suspend: " + which + " cannot release its memory (the CPU and CUDA backends of one node can)",
                           rank);
  }
  Bootstrap& bs = *me.bootstrap;
  const Deadline dl = Deadline::after(me.ctx.options.join_timeout);
  std::string state = "ok", why;
  if (me.suspended.load()) {
    state = "again";
    why = "suspended already";
  } else {
    try {
      me.backend->quiesce();
    } catch (const std::exception& e) {
      state = "fail";
      why = Outcomes::reason(e);
    }
  }
  const auto all = agree_step(bs, "suspend", state, why, rank, dl);
  if (!all.ranks("suspend:again").empty())
    throw UnsupportedError("suspend: rank(s) " + rank_list(all.ranks("suspend:again")) +
                               " are suspended already (a suspended communicator is resumed, not suspended again)",
                           rank, all.ranks("suspend:again").front());
  if (const auto failed = all.ranks("suspend:fail"); !failed.empty())
    throw Error(ErrorCode::Remote, "suspend: a call in flight failed on " + all.reasons("suspend:fail"), rank,
                failed.front());
  Attempt mine;
  try {
    me.backend->suspend();
  } catch (const Error& e) {
    mine = {Outcomes::reason(e), e.code(), e.culprit()};
  } catch (const std::exception& e) {
    mine = {Outcomes::reason(e), ErrorCode::Internal};
  }
  // Suspended whatever the verdict: what was released is gone, and resume() makes it all again.
  me.suspended.store(true);
  auto bad = failed_ranks(bs, dl, mine);
  if (!bad.ok()) bad.raise("suspend: releasing the backend's memory failed on ", rank);
  LOG_INFO("rank " << rank << ": suspended (" << to_string(me.backend->kind()) << " backend's memory released)");
}

void Communicator::resume() {
  Impl& me = *impl_;
  me.check_process();
  me.abort->throw_if_raised();
  const int rank = me.ctx.rank;
  Bootstrap& bs = *me.bootstrap;
  const Deadline dl = Deadline::after(me.ctx.options.join_timeout);
  const bool mine_suspended = me.suspended.load();
  const auto all = agree_step(bs, "resume", mine_suspended ? "ok" : "active", mine_suspended ? "" : "not suspended", rank, dl);
  if (const auto active = all.ranks("resume:active"); !active.empty())
    throw UnsupportedError("resume: rank(s) " + rank_list(active) +
                               " are not suspended (resume() follows suspend() on every rank)",
                           rank, active.front());
  std::unique_ptr<BackendImpl> unused;
  // try_make's rules: a rank that timed out in the exchange aborts the group with its cause.
  auto bad = failed_ranks(bs, dl, try_make(bs, unused, [&]() -> std::unique_ptr<BackendImpl> {
                            me.backend->resume();
                            return nullptr;
                          }));
  if (!bad.ok()) {
    // Some ranks made their memory and others did not: all release again and stay suspended,
    // so a retry starts from the same state everywhere.
    try {
      me.backend->suspend();
    } catch (const std::exception& e) {
      LOG_WARN("rank " << rank << ": releasing after a failed resume: " << e.what());
    }
    bad.raise("resume: making the backend's memory again failed on ", rank);
  }
  me.suspended.store(false);
}

bool Communicator::suspended() const noexcept { return impl_->suspended.load(); }

MemoryStats Communicator::mem_stats() const {
  impl_->check_process();
  MemoryStats m = impl_->backend->memory();
  m.suspended = impl_->suspended.load();
  return m;
}

void Communicator::abort(const std::string& reason) {
  impl_->check_process();
  impl_->bootstrap->abort(reason);
}
bool Communicator::aborted() const noexcept { return impl_->abort->raised(); }
void Communicator::refuse_call(const InvalidArgument& error) { impl_->refuse(error); }

std::string Communicator::plan(Collective c, size_t bytes, bool registered_output) const {
  return impl_->backend->plan(c, bytes, registered_output);
}

std::vector<std::pair<std::string, double>> Communicator::setup_ms() const { return impl_->backend->setup_ms(); }

}  // namespace actorcc
