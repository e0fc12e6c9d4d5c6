// Private to the root server's files (root.cpp, root_admission.cpp, root_group.cpp,
// root_io.cpp): its state and limits. One poll()-driven thread owns all of it, so nothing
// here is locked except the two atomics that other threads read.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/hello_auth.hpp"
#include "bootstrap/root.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/stranger_gate.hpp"
#include "bootstrap/wire.hpp"
#include "common/deadline.hpp"
#include "common/text.hpp"
#include "common/thread_cpu.hpp"

namespace actorcc::bootstrap {

namespace root_detail {

// A connection must say HELLO this soon after connecting, else it is a stray (port scanner,
// wrong program) and is dropped without disturbing the group.
inline constexpr std::chrono::milliseconds kHelloTimeout(5000);
// A rejected connection gets this long to read its REJECT and hang up.
inline constexpr std::chrono::milliseconds kCloseLinger(2000);
// A peer that stops reading must not make the root buffer without bound: two result frames.
inline constexpr size_t kMaxOutBuffer = 2 * static_cast<size_t>(wire::kMaxPayload) + (1u << 20);
// Allgather blobs the root holds for a rank ahead of the others (allgathers some rank has not
// reached yet): a rank's own call waits for its result, so an honest rank is ahead by at most
// one blob per thread calling, each within allgather_limit (kMaxPayload / world). Beyond these,
// the rank is refused (the group fails naming it), so one authenticated connection (any local
// user on the from_address loopback path without a secret) cannot make the root hold gigabytes.
inline constexpr size_t kMaxHeldPerRank = wire::kMaxPayload;
inline constexpr size_t kMaxHeldTotal = 4 * static_cast<size_t>(wire::kMaxPayload);
// How late the root may log a rank lost after the group formed (see Impl::LossBatch): the
// processes of a job that shuts down can end over more than 2 s on a loaded host.
inline constexpr std::chrono::milliseconds kLossGrace(5000);
// No group is larger than this; a HELLO claiming more is refused before anything is sized by it.
inline constexpr int kMaxWorld = wire::kMaxWorld;
// While a group forms: the root says which ranks have not joined (in its log, and to the ranks
// that have, which log it too) this long after the first arrived, then every kJoinNoteEvery.
inline constexpr std::chrono::milliseconds kJoinNoteFirst(5000);
inline constexpr std::chrono::milliseconds kJoinNoteEvery(10000);
// How long a one-against-one world-size dispute waits for a third rank's claim.
inline constexpr std::chrono::milliseconds kDisputeWait(2000);
// A from_address root without a run id welcomes its group no sooner than this after it began
// listening. Two launches on one address started this close always show each other before any
// rank has the peer table: a rank that was retrying the connection before the root came up
// reaches it within its back-off (500 ms at most), and a second rank 0 reports its failed
// listen at once. A launch that starts later still poisons the group when it shows, but ranks
// may have returned results by then: only a run id keeps it out from the start.
inline constexpr std::chrono::milliseconds kClaimWindow(1000);
// Compares tokens in time independent of where they differ.
inline bool same_token(const wire::Token& a, const wire::Token& b) {
  uint8_t d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<uint8_t>(a[i] ^ b[i]);
  return d == 0;
}

inline std::string rank_list(const std::vector<int>& ranks) {
  return cat(ranks.size() == 1 ? "rank " : "ranks ", join(ranks, ", "));
}

// The timeout as the user set it: HELLO carries what was left of it when the rank connected
// (999 ms of a 1 s timeout), so round to tenths of a second.
inline std::string seconds_text(uint64_t ms) {
  if (ms < 100) return cat(ms, " ms");
  const uint64_t tenths = (ms + 50) / 100;
  return tenths % 10 ? cat(tenths / 10, '.', tenths % 10, " s") : cat(tenths / 10, " s");
}

inline Clock::time_point saturating_after(Clock::time_point now, uint64_t ms) {
  auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now).count();
  if (ms >= static_cast<uint64_t>(limit)) return Clock::time_point::max();
  return now + std::chrono::milliseconds(ms);
}

struct Conn {
  enum class State { Open, Closing, Broken, Dead };
  net::Fd fd;
  std::string peer;  // "ip:port"
  wire::FrameDecoder in;
  std::string out;  // bytes not yet accepted by the kernel
  size_t out_pos = 0;
  State state = State::Open;
  std::string broken_detail;
  Clock::time_point hello_by{};  // only before HELLO
  Clock::time_point close_by{};  // only while Closing
  wire::Token nonce{};           // this connection's CHALLENGE, which its HELLO must answer
  int rank = -1;                 // >= 0 once admitted
  bool disputed = false;         // held: its HELLO's world size disagrees (Impl::disputed)
  bool write_shut = false;
  Conn() { in.set_max_payload(wire::kMaxHelloPayload); }  // lifted once admitted
};

}  // namespace root_detail

struct RootServer::Impl {
  using Conn = root_detail::Conn;
  Impl(net::Fd l, const wire::Token& t, int expected, std::optional<RunId> run)
      : listener(std::move(l)),
        token(t),
        expected_world(expected),
        run_id(std::move(run)),
        where(net::local_address(listener.get()).to_string()),
        gate("actorcc root " + where),
        welcome_not_before(run_id && run_id->value.empty() ? Clock::now() + root_detail::kClaimWindow
                                                           : Clock::time_point{}) {}

  net::Fd listener;
  net::Fd wake_r, wake_w;  // self-pipe: stop() wakes poll()
  wire::Token token;
  int expected_world = 0;  // from the id (from_address path); 0 = fixed by the first HELLO
  std::optional<RunId> run_id;  // the run this root serves (from_address path); nullopt: not compared
  std::string where;  // listener address, for log lines
  std::string self_host = net::host_name();  // this process's, for the second-root message
  ChallengeSource challenges;
  std::atomic<bool> stop{false};
  std::atomic<bool> admitted_any{false};  // a rank has joined: the root is in use
  net::StrangerGate gate;  // the cap, the EMFILE back-off, the log limit
  Clock::time_point welcome_not_before;  // kClaimWindow
  Clock::time_point next_join_note{};  // when to say again which ranks have not joined
  // ACTORCC_LOG=debug: when the thread began serving, and its CPU figures then (the WELCOME's
  // line says whether a slow formation was this thread waiting for a CPU)
  Clock::time_point serving_since{};
  std::optional<ThreadCpu> serving_cpu;

  std::list<Conn> conns;  // list: stable addresses for rank_conn
  int world = -1;
  std::string world_fixed_by;
  // HELLOs whose world size disagrees with the group's, held (not admitted, not answered) while
  // it is one claim against one: the first rank to arrive fixes the size, and only a third
  // claim says which of the two is wrong (root_admission.cpp, settle_world()).
  struct Disputed {
    Conn* conn;
    wire::Hello hello;
  };
  std::vector<Disputed> disputed;
  std::optional<Clock::time_point> dispute_until;
  std::vector<Conn*> rank_conn;      // open connection of each admitted rank
  std::vector<std::string> joined_from;  // "host H pid P at ip:port" per admitted rank
  std::vector<std::string> blobs;
  int joined = 0;
  std::optional<Clock::time_point> join_deadline;
  uint64_t join_timeout_ms = 0;
  bool welcomed = false;
  std::optional<wire::Message> failure;  // set once the group can no longer form
  std::vector<uint64_t> sent;            // allgathers each rank has sent
  std::vector<std::string> gone;         // why a rank is no longer connected ("" = connected)
  std::vector<bool> left;                // left cleanly (BYE) after the group formed
  struct Pending {
    std::vector<std::string> blobs;
    std::vector<bool> have;
    int count = 0;
  };
  std::map<uint64_t, Pending> pending;
  std::vector<size_t> held;  // bytes of each rank's blobs in `pending` (kMaxHeldPerRank)
  size_t held_total = 0;     // all of them (kMaxHeldTotal)
  // Set once a rank was refused for running ahead: the group is over, every later allgather
  // is answered with it.
  std::optional<wire::PeerLost> overrun;
  // Ranks lost after the group formed, not yet logged. The peers are told at once (PeerLost);
  // only the root's own log line waits up to kLossGrace: when every rank still connected is
  // lost within it, the processes ended together (ray.shutdown() kills every actor at once),
  // which is the group's end, not a failure, and is logged so, in one line at info level.
  struct LossBatch {
    Clock::time_point first;
    int connected = 0;  // ranks connected just before the first loss
    std::vector<int> ranks;
    std::vector<std::string> reasons;
  };
  std::optional<LossBatch> losses;

  // ---- output (root_io.cpp) ----
  void flush(Conn& c);
  void send(Conn& c, const wire::Message& m);
  void broadcast(const wire::Message& m, const Conn* except = nullptr);
  void close_after(Conn& c, const wire::Message& m);
  void mark_broken(Conn& c, const std::string& detail);
  void detach_rank(Conn& c);

  // ---- admission (root_admission.cpp) ----
  void fail_group(const wire::Message& m);
  void on_hello(Conn& c, const wire::Hello& h);
  // A rank 0 that could not listen on this root's address: two roots for one address.
  void on_second_root(Conn& c, const wire::Hello& h);
  // Sends the WELCOME once every rank joined (and kClaimWindow has passed, where it applies).
  void welcome_if_complete();
  // A joiner's refusal (wire::Refuse): the group fails at once, naming the joiner and why.
  void on_refuse(Conn& c, const wire::Refuse& r);
  // Decides a world-size dispute when the claims allow it (or `expired`): the ranks in the
  // minority are at fault, and the group fails naming them.
  void settle_world(bool expired);

  // ---- the formed group (root_group.cpp) ----
  void on_allgather(Conn& c, const wire::Allgather& a);
  // Refuses rank c.rank, whose blob would take the root past kMaxHeldPerRank / kMaxHeldTotal.
  void refuse_overrun(Conn& c, const wire::Allgather& a);
  // Frees every blob held for an allgather (the group is over, or failed).
  void release_pending();
  void on_status(Conn& c, const wire::Status& s);
  void on_abort(Conn& c, const wire::Abort& a);
  void on_bye(Conn& c, const wire::Bye& b);
  // Allgathers that wait for `leaver` (which left cleanly) fail now, naming it; later ones
  // fail as they are called (on_allgather).
  void fail_unfinishable(int leaver);
  // A connection ended without BYE (EOF, error, garbage, protocol error).
  void on_lost(Conn& c);
  void log_losses(bool ending);
  void dispatch(Conn& c, wire::Message&& m);

  // ---- I/O events and timers (root_io.cpp) ----
  size_t unauthenticated() const;
  // Closes the longest-waiting unauthenticated connection (conns is in accept order).
  void evict_oldest_stranger();
  void accept_all();
  void read_from(Conn& c);
  void on_timers();
  // Tells the log and the ranks already joined which ranks the forming group still waits for.
  void note_missing_joiners(Clock::time_point now);
  // Handles broken connections (which may break others through the broadcasts they cause)
  // until none is left, then frees the dead ones.
  void sweep();
  bool done() const;
  int poll_timeout() const;
  void run();
};

}  // namespace actorcc::bootstrap
