// Communicator::suspend and resume: the backend's memory released and made again, on every rank
// together, each step ending in a verdict every rank shares.
#include <string>
#include <vector>

#include "bootstrap/outcomes.hpp"
#include "bootstrap/verdict.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "core/communicator_impl.hpp"

namespace actorcc {

namespace {

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
    throw UnsupportedError(call + ": rank(s) " + join(other, ", ") + " called " + theirs + " at the same time " +
                               "(suspend and resume are collective: every rank makes the same call)",
                           rank, other.front());
  return all;
}

}  // namespace

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
                                  ? cat("the backend of a group across ", me.ctx.num_nodes, " nodes")
                                  : cat("the ", to_string(me.backend->kind()), " backend");
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
  if (const auto again = all.ranks("suspend:again"); !again.empty())
    throw UnsupportedError("suspend: rank(s) " + join(again, ", ") +
                               " are suspended already (a suspended communicator is resumed, not suspended again)",
                           rank, again.front());
  if (const auto failed = all.ranks("suspend:fail"); !failed.empty())
    throw Error(ErrorCode::Remote, "suspend: a call in flight failed on " + all.reasons("suspend:fail"), rank,
                failed.front());
  Attempt mine;
  try {
    me.backend->suspend();
  } catch (const std::exception& e) {
    mine = attempt_of(e);
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
    throw UnsupportedError("resume: rank(s) " + join(active, ", ") +
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

}  // namespace actorcc
