#include "bootstrap/client.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "actorcc/error.hpp"
#include "bootstrap/frame_io.hpp"
#include "bootstrap/greeting.hpp"
#include "bootstrap/hello_auth.hpp"
#include "bootstrap/id_fields.hpp"
#include "bootstrap/run_id.hpp"
#include "common/fd_table.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "common/thread_cpu.hpp"

namespace actorcc {

using namespace std::chrono;
using bootstrap::BootstrapClient;
using net::IoStatus;

namespace {

// The root enforces the join deadline and answers JOIN_FAILED; the client waits this much
// longer before concluding the root itself is not answering.
constexpr milliseconds kJoinGrace(2000);
// How long refusals of a UniqueId.create() root's address may last before it counts as gone
// (it listens from before its id exists: a refusal is not "not up yet"; the grace covers only
// a host under momentary pressure).
constexpr milliseconds kRefusedGrace(2000);
// Bounds on the best-effort messages of teardown and abort, and on the status query that
// explains an allgather timeout.
constexpr milliseconds kByeTimeout(500);
constexpr milliseconds kAbortSendTimeout(1000);
constexpr milliseconds kStatusTimeout(1000);
// How long a refusal to join (Bootstrap::refuse) may take in all: the caller raises its own
// error right after, so this is the delay a mistake adds on the rank that made it.
constexpr milliseconds kRefuseTimeout(3000);

// The root-lifetime contract (docs/reliability.md): the group lives only as long as the process
// hosting its root, so losing the root names that process loudly. A formed group is over, not
// its survivors: they can go on in a shrunk group, whose root is one of theirs (docs/elastic.md),
// so the text says how. One still forming has no successors yet: it needs a new id.
std::string root_lost_text(const std::string& where, int root_rank, const std::string& detail, bool formed) {
  const std::string next =
      !formed ? " while the group formed, so it cannot form: every rank needs a new id"
      : root_rank >= 0
          ? cat(". This group's calls fail from now on; the other ranks can go on without rank ", root_rank,
                " in a shrunk group: comm.shrink(exclude=[", root_rank, "]) on each of them")
          : ". This group's calls fail from now on; its ranks can go on in a shrunk group, whose root one of them "
            "hosts: comm.shrink(exclude=[]) on each of them";
  if (root_rank >= 0)
    return cat("rank ", root_rank,
               " (which hosts the group's root) died or closed: lost the connection to the actorcc root at ", where,
               ", hosted by rank ", root_rank, " (", detail, ")", next);
  return "lost the connection to the actorcc root at " + where +
         ", hosted by the process that called UniqueId.create() (" + detail + "): that process died or closed" + next;
}

// The id's fields, once join()'s checks pass: a corrupt id names what is wrong with it.
bootstrap::IdFields checked_fields(const UniqueId& id, int rank, int world) {
  bootstrap::IdFields f;
  try {
    f = bootstrap::read_id(id);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("this rank's UniqueId cannot be used: " + e.message() +
                              " (an id is the 128 bytes UniqueId.create() made, passed on whole: str() and "
                              "UniqueId.parse(), pickling, or to_bytes() and from_bytes())",
                          rank);
  }
  if (f.version != wire::kProtocolVersion)
    throw InvalidArgument(cat("the UniqueId was made by bootstrap protocol version ", f.version, ", this build speaks ",
                              wire::kProtocolVersion),
                          rank);
  if (world <= 0) throw InvalidArgument(cat("world size ", world, " is not positive"), rank);
  if (rank < 0 || rank >= world)
    throw InvalidArgument(cat("rank ", rank, " is out of range for world size ", world), rank);
  if (f.rank0_hosts && f.world != world)
    throw InvalidArgument(cat("the address was set up for world size ", f.world, ", not ", world), rank);
  return f;
}

// What this rank says to the root first: a HELLO, or the same fields in a REFUSE, signed for the
// root's challenge on this connection (bootstrap/hello_auth.hpp).
wire::Hello hello_of(const bootstrap::IdFields& f, int rank, int world, Deadline join_deadline, std::string blob,
                     const wire::Token& nonce) {
  const bootstrap::RunId run = bootstrap::launcher_run_id();
  wire::Hello h;
  h.rank = rank;
  h.world = world;
  h.join_timeout_ms = static_cast<uint64_t>(std::max<int64_t>(1, join_deadline.remaining().count()));
  h.pid = static_cast<uint32_t>(::getpid());
  h.host = net::host_name();
  h.run_id = run.value;
  h.run_id_from = run.source;
  h.blob = std::move(blob);
  bootstrap::sign_hello(h, f.token, nonce);
  return h;
}

}  // namespace

void Bootstrap::check_join(const UniqueId& id, int rank, int world) { checked_fields(id, rank, world); }

void Bootstrap::refuse(const UniqueId& id, int rank, int world, const std::string& reason,
                       Deadline join_deadline) noexcept {
  try {
    const bootstrap::IdFields f = bootstrap::read_id(id);
    if (f.version != wire::kProtocolVersion) return;  // a root of another version would not read it
    // A from_address root may not be up yet: retry for as long as the refusal may take.
    const Deadline by = Deadline::after(kRefuseTimeout);
    std::optional<bootstrap::Greeting> greeted =
        bootstrap::greet(f.root, bootstrap::GreetingRules{by, by, f.rank0_hosts, std::nullopt, {}}, nullptr, rank);
    if (!greeted) return;
    net::Fd fd = std::move(greeted->fd);
    wire::Refuse r{hello_of(f, rank, world, join_deadline, "", greeted->nonce), reason};
    if (wire::send_message(fd.get(), r, by).status != IoStatus::Ok) return;
    // The root answers with the group's failure and closes: this end waits for that, so the
    // refusal is read before the connection goes (a close with the answer unread resets it).
    (void)wire::recv_message(fd.get(), by);
    LOG_DEBUG("actorcc rank " << rank << ": told the root at " << f.root.to_string() << " that it will not join: "
                              << reason);
  } catch (const std::exception& e) {
    LOG_DEBUG("actorcc rank " << rank << ": could not tell the root that it will not join: " << e.what());
  }
}

std::unique_ptr<Bootstrap> Bootstrap::join(const UniqueId& id, int rank, int world, const std::string& self_blob,
                                           Deadline join_deadline, std::shared_ptr<AbortSignal> abort) {
  const bootstrap::IdFields f = checked_fields(id, rank, world);
  if (!abort) abort = std::make_shared<AbortSignal>(rank);
  if (abort->self_rank() < 0) abort->set_self_rank(rank);

  const std::string where = f.root.to_string();
  const int root_rank = f.rank0_hosts || f.creator_is_rank0 ? 0 : -1;
  const Deadline answer_by = join_deadline.when() >= Clock::time_point::max() - kJoinGrace
                                 ? Deadline::never()
                                 : Deadline(join_deadline.when() + kJoinGrace);

  // A UniqueId.create() root listens before its id exists, so a refused connection means it is
  // gone for good: fail now with the reason instead of retrying until the join deadline. A
  // from_address root starts with rank 0, which may come later: retry for it.
  // ACTORCC_LOG=debug: the join's steps, timed from here (a slow join shows where it waited)
  const auto t_join = Clock::now();
  const std::optional<ThreadCpu> cpu_join =
      log::level() >= log::Level::Debug ? thread_cpu() : std::nullopt;
  auto since = [&t_join] { return duration<double, std::milli>(Clock::now() - t_join).count(); };
  // Silence means "not an actorcc root" only where the user picked the port (from_address):
  // a UniqueId.create() root listens from its creation on a port the system chose, so a silent
  // one is that root, stopped or overloaded, and is waited for as before.
  bootstrap::GreetingRules rules{join_deadline, answer_by, f.rank0_hosts,
                                 f.rank0_hosts ? std::nullopt : std::optional<milliseconds>(kRefusedGrace), {}};
  auto no_answer = [&]() {
    throw TimeoutError(cat("the actorcc root at ", where, " did not answer within the join deadline (plus ",
                           kJoinGrace.count() / 1000, " s grace)"),
                       rank);
  };
  rules.on_gone = [&](const Error& e) {
    throw RemoteError("the actorcc root of this UniqueId at " + where + " is gone: " + e.message() +
                          ". A UniqueId.create() root listens from its creation until every rank of its group "
                          "has left, so either this id's group already formed and ended (a UniqueId serves one "
                          "group: create a new one for each group) or the process that created it exited",
                      -1, rank);
  };
  std::optional<bootstrap::Greeting> greeted = bootstrap::greet(f.root, rules, abort.get(), rank);
  if (!greeted) no_answer();
  net::Fd fd = std::move(greeted->fd);

  const wire::Hello h = hello_of(f, rank, world, join_deadline, self_blob, greeted->nonce);

  auto root_lost = [&](const std::string& detail) {
    // "(while joining)" marks a root lost before this rank was in (a shrink retries on it).
    abort->raise(root_rank, ErrorCode::Remote, root_lost_text(where, root_rank, detail, false) + " (while joining)");
    abort->rethrow();
  };

  // This rank's own abort while it waits (interrupt_constructions: Ctrl-C) goes to the root, so
  // the ranks already in the group learn why, naming this rank; another rank's abort came from
  // there.
  auto aborted = [&]() {
    if (abort->culprit() == rank)
      wire::send_message(fd.get(), wire::Abort{rank, abort->reason(), rank}, Deadline::after(kAbortSendTimeout));
    abort->rethrow();
  };
  LOG_DEBUG("actorcc rank " << rank << ": connected to the root at " << where << " in " << since() << " ms; "
                            << fd_table_note());
  net::IoResult io = wire::send_message(fd.get(), h, answer_by, abort.get());
  if (io.status == IoStatus::Aborted) abort->rethrow();
  if (io.status == IoStatus::Timeout) no_answer();
  if (io.status == IoStatus::Closed) root_lost(io.detail);

  for (;;) {
    wire::Received in;
    try {
      in = wire::recv_message(fd.get(), answer_by, abort.get());
    } catch (const wire::WireError& e) {
      root_lost(std::string("it sent a malformed frame: ") + e.what());
    }
    if (in.io.status == IoStatus::Aborted) aborted();
    if (in.io.status == IoStatus::Timeout) no_answer();
    if (in.io.status == IoStatus::Closed) root_lost(in.io.detail);
    wire::Message& m = *in.msg;
    if (auto* w = std::get_if<wire::Welcome>(&m)) {
      if (log::level() >= log::Level::Debug) {
        const std::string cpu = thread_cpu_since(cpu_join);  // first: its span lies within since()'s
        LOG_DEBUG("actorcc rank " << rank << ": the group formed (the root's WELCOME) " << since()
                                  << " ms into the join" << cpu);
      }
      if (static_cast<int>(w->blobs.size()) != world)
        root_lost(cat("its WELCOME has ", w->blobs.size(), " blobs for world size ", world));
      return std::make_unique<BootstrapClient>(std::move(fd), rank, world, std::move(w->blobs), abort, where,
                                               root_rank);
    }
    if (auto* s = std::get_if<wire::StatusReply>(&m); s && s->seq == wire::kJoinStatusSeq) {
      LOG_WARN("actorcc rank " << rank << ": the group at " << where << " is " << s->text);
      continue;
    }
    if (auto* r = std::get_if<wire::Reject>(&m))
      throw InvalidArgument("the actorcc root at " + where + " rejected the join: " + r->reason, rank);
    if (auto* j = std::get_if<wire::JoinFailed>(&m)) {
      abort->raise(j->culprit, ErrorCode::Timeout, "join failed: " + j->reason + " (root at " + where + ")");
      abort->rethrow();
    }
    if (auto* p = std::get_if<wire::PeerLost>(&m)) {
      // Not recorded as a loss: a rank leaving a group that failed to form says goodbye this
      // way too (a shrink's failed attempt), and no shrink may exclude it for that.
      abort->raise(p->rank, ErrorCode::Remote, "join failed: " + p->reason);
      abort->rethrow();
    }
    if (auto* a = std::get_if<wire::Abort>(&m)) {
      abort->raise(a->culprit, ErrorCode::Remote, cat("join failed: rank ", a->rank, " aborted: ", a->reason));
      abort->rethrow();
    }
    LOG_WARN("actorcc rank " << rank << ": ignoring unexpected " << wire::to_string(wire::type_of(m))
                             << " from the root while joining");
  }
}

size_t allgather_limit(int world) {
  // AllgatherResult = seq u64 + count u32 + (u32 length + bytes) per rank.
  const size_t w = static_cast<size_t>(std::max(world, 1));
  return (wire::kMaxPayload - 12) / w - 4;
}

namespace bootstrap {

BootstrapClient::BootstrapClient(net::Fd fd, int rank, int world, std::vector<std::string> blobs,
                                 std::shared_ptr<AbortSignal> abort, std::string root_addr, int root_rank)
    : fd_(std::move(fd)),
      rank_(rank),
      world_(world),
      blobs_(std::move(blobs)),
      abort_(std::move(abort)),
      root_addr_(std::move(root_addr)),
      root_rank_(root_rank) {
  // Wake waiting callers the moment the signal is raised, whoever raises it.
  std::weak_ptr<Shared> weak = shared_;
  abort_->on_raise([weak] {
    if (auto s = weak.lock()) {
      std::lock_guard<std::mutex> g(s->mu);
      s->cv.notify_all();
    }
  });
  reader_ = std::thread([this] { read_loop(); });
}

BootstrapClient::~BootstrapClient() {
  closing_.store(true, std::memory_order_release);
  if (!dropped_) {
    std::lock_guard<std::mutex> g(send_mu_);
    // A group that failed here first (found in shared memory: a mismatch, a local peer's
    // timeout) may not have reached the root yet. Its cause goes first, on the same connection,
    // so no rank can learn of this leave before the failure that ended the group: without it, a
    // rank still waiting read "rank R closed the communicator" where another rank was at fault.
    if (abort_->raised() && !abort_sent_ && !told_by_root_.load() && abort_->culprit() >= 0) {
      abort_sent_ = true;
      wire::send_message(fd_.get(), wire::Abort{rank_, abort_->reason(), abort_->culprit()},
                         Deadline::after(kAbortSendTimeout));  // best effort
    }
    wire::send_message(fd_.get(), wire::Bye{collectives_.load(std::memory_order_relaxed)},
                       Deadline::after(kByeTimeout));  // best effort
  }
  // A graceful close: only the write side first, then wait (bounded) for the root to close
  // its side once it has read the BYE. Closing both at once would make the root's next frame to
  // us (another rank's PEER_LEFT, say) fail with EPIPE before it reads the BYE, and the root
  // would report this clean leave as a lost rank.
  if (!dropped_ && ::shutdown(fd_.get(), SHUT_WR) == 0) {
    std::unique_lock<std::mutex> g(shared_->mu);
    shared_->cv.wait_until(g, Deadline::after(kByeTimeout).when(), [this] { return shared_->reader_done; });
  }
  // shutdown() wakes the reader's poll/recv with EOF; close happens when fd_ is destroyed,
  // after the join, so the reader never touches a recycled descriptor.
  ::shutdown(fd_.get(), SHUT_RDWR);
  if (reader_.joinable()) reader_.join();
}

void BootstrapClient::drop_connection_for_test() {
  closing_.store(true, std::memory_order_release);
  dropped_ = true;
  ::shutdown(fd_.get(), SHUT_RDWR);
}

void BootstrapClient::read_loop() {
  struct Done {
    Shared& s;
    ~Done() {
      std::lock_guard<std::mutex> g(s.mu);
      s.reader_done = true;
      s.cv.notify_all();
    }
  } done{*shared_};
  for (;;) {
    wire::Received in;
    try {
      in = wire::recv_message(fd_.get(), Deadline::never());
    } catch (const wire::WireError& e) {
      if (!closing_.load(std::memory_order_acquire))
        abort_->raise(root_rank_.load(std::memory_order_relaxed), ErrorCode::Remote,
                      "the actorcc root at " + root_addr_ + " sent a malformed frame: " + e.what());
      return;
    }
    if (in.io.status != IoStatus::Ok) {
      if (!closing_.load(std::memory_order_acquire)) {
        const int host = root_rank_.load(std::memory_order_relaxed);
        // A root host's death is a rank's loss like another's (a shrink excludes it).
        abort_->raise_lost(host, root_lost_text(root_addr_, host, in.io.detail, true));
      }
      return;
    }
    wire::Message& m = *in.msg;
    if (auto* r = std::get_if<wire::AllgatherResult>(&m)) {
      std::lock_guard<std::mutex> g(shared_->mu);
      if (shared_->abandoned.erase(r->seq) == 0) shared_->results[r->seq] = std::move(r->blobs);
      shared_->cv.notify_all();
    } else if (auto* s = std::get_if<wire::StatusReply>(&m)) {
      std::lock_guard<std::mutex> g(shared_->mu);
      shared_->status[s->seq] = std::move(*s);
      shared_->cv.notify_all();
    } else if (auto* a = std::get_if<wire::Abort>(&m)) {
      told_by_root_.store(true);
      abort_->raise(a->culprit, ErrorCode::Remote, cat("rank ", a->rank, " aborted: ", a->reason));
    } else if (auto* p = std::get_if<wire::PeerLost>(&m)) {
      told_by_root_.store(true);
      // Every loss is recorded, not only the first: ranks killed together arrive one by one.
      abort_->raise_lost(p->rank, p->reason);
    } else if (auto* l = std::get_if<wire::PeerLeft>(&m)) {
      std::lock_guard<std::mutex> g(departures_mu_);
      departures_.push_back({l->rank, l->collectives});
      const bool was_raised = abort_->raised();
      if (listener_) listener_(departures_.back());
      // A failure the departure caused came from the root too: every rank hears the departure.
      if (!was_raised && abort_->raised()) told_by_root_.store(true);
    } else if (auto* j = std::get_if<wire::JoinFailed>(&m)) {
      abort_->raise(j->culprit, ErrorCode::Timeout, j->reason);
    } else {
      LOG_WARN("actorcc rank " << rank_ << ": ignoring unexpected " << wire::to_string(wire::type_of(m))
                               << " from the root");
    }
  }
}

void BootstrapClient::on_departure(std::function<void(const Departure&)> listener) {
  std::lock_guard<std::mutex> g(departures_mu_);
  listener_ = std::move(listener);
  for (const auto& d : departures_) listener_(d);
}

void BootstrapClient::fail_root_lost(const std::string& why) {
  abort_->raise(root_rank_.load(std::memory_order_relaxed), ErrorCode::Remote,
                "the actorcc root at " + root_addr_ + " " + why);
  abort_->rethrow();
}

std::vector<std::string> BootstrapClient::allgather(const std::string& blob, Deadline deadline) {
  return gather(blob, deadline, "allgather");
}

void BootstrapClient::barrier(Deadline deadline) { gather(std::string(), deadline, "barrier"); }

std::vector<std::string> BootstrapClient::gather(const std::string& blob, Deadline deadline, const char* what) {
  abort_->throw_if_raised();
  // Refused here, before a sequence number is taken or a byte is sent: the caller gets a clear
  // error, the other ranks are not disturbed, and the group stays usable.
  if (blob.size() > allgather_limit(world_))
    throw InvalidArgument(cat(what, " blob of ", blob.size(), " bytes is above the limit of ", allgather_limit(world_),
                              " bytes per rank for a group of ", world_,
                              " (all ranks' blobs travel back in one frame of at most ", wire::kMaxPayload >> 20,
                              " MiB)"),
                          rank_);
  uint64_t seq;
  {
    std::lock_guard<std::mutex> g(send_mu_);
    seq = next_seq_++;
    net::IoResult io = wire::send_message(fd_.get(), wire::Allgather{seq, blob}, deadline, abort_.get());
    // A partly sent frame leaves the stream unusable, so any failure here ends the group.
    if (io.status == IoStatus::Aborted) abort_->rethrow();
    if (io.status == IoStatus::Timeout) fail_root_lost("did not accept the " + std::string(what) + " in time");
    if (io.status == IoStatus::Closed) fail_root_lost("closed the connection (" + io.detail + ")");
  }
  std::unique_lock<std::mutex> lk(shared_->mu);
  for (;;) {
    auto it = shared_->results.find(seq);
    if (it != shared_->results.end()) {
      auto out = std::move(it->second);
      shared_->results.erase(it);
      return out;
    }
    if (abort_->raised()) {
      shared_->abandoned.insert(seq);
      lk.unlock();
      abort_->rethrow();
    }
    if (deadline.expired()) break;
    // The AbortSignal listener notifies; the 200 ms bound is only a safety net.
    shared_->cv.wait_until(lk, std::min(deadline.when(), Clock::now() + milliseconds(200)));
  }
  shared_->abandoned.insert(seq);
  lk.unlock();
  int first_missing = -1;
  const std::string missing = ask_missing(seq, &first_missing);
  // Ranks whose deadlines fall together time out together; if another one's verdict (or a
  // death) reached this rank meanwhile, that is the group's first cause, so raise it instead.
  abort_->throw_if_raised();
  throw TimeoutError(cat(what, " #", seq, " timed out: ", missing),
                     rank_, first_missing);
}

// Asks the root which ranks have not sent allgather `seq`, for the timeout message (and the
// first of them, for the error's culprit).
std::string BootstrapClient::ask_missing(uint64_t seq, int* first_missing) {
  Deadline d = Deadline::after(kStatusTimeout);
  {
    std::lock_guard<std::mutex> g(send_mu_);
    if (wire::send_message(fd_.get(), wire::Status{seq}, d).status != IoStatus::Ok)
      return "could not ask the root which ranks are missing";
  }
  std::unique_lock<std::mutex> lk(shared_->mu);
  while (!d.expired() && !abort_->raised()) {
    auto it = shared_->status.find(seq);
    if (it != shared_->status.end()) {
      std::string text = it->second.text;
      if (!it->second.missing.empty()) *first_missing = it->second.missing.front();
      shared_->status.erase(it);
      return text;
    }
    shared_->cv.wait_until(lk, d.when());
  }
  return "the root at " + root_addr_ + " did not say which ranks are missing";
}

void BootstrapClient::abort(const std::string& reason, int culprit) {
  if (culprit < 0 || culprit >= world_) culprit = rank_;
  {
    std::lock_guard<std::mutex> g(send_mu_);
    if (!abort_sent_) {
      abort_sent_ = true;
      wire::send_message(fd_.get(), wire::Abort{rank_, reason, culprit}, Deadline::after(kAbortSendTimeout));  // best effort
    }
  }
  abort_->raise(culprit, ErrorCode::Remote, cat("rank ", rank_, " aborted: ", reason));
}

}  // namespace bootstrap
}  // namespace actorcc
