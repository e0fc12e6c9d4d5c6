// mp_worker's elastic membership scenarios (--mode elastic --phase P), driven by
// test_elastic.cpp. Progress lines on stdout carry steady-clock times (ns, one clock for every
// process of the machine) so the driver can measure across processes:
//   FAULT_AT t       the culprit, just before it SIGKILLs itself
//   FIRST_OK t       a survivor's first correct all_reduce in the shrunk group
//   GROW_ID hex      the shrunk group's rank 0 made the grown group's id (the driver starts a
//                    newcomer with it)
//   READY t / REJOINED t   a newcomer before joining / after its first correct all_reduce
// Phases:
//   kill_between, kill_large   --culprit dies between calls / inside an 8 MiB all_reduce; the
//                survivors shrink without it, run the matrix, grow back to --world with a
//                newcomer taking its rank, run the matrix again
//   trial        the same up to FIRST_OK only (the latency trials)
//   planned      a healthy group shrinks without --culprit, which stays alive: its own shrink
//                without itself, its old-group calls and a join of the new group are refused
//   shrink_kill  as kill_between, and --victim dies inside the shrink (in the new group's setup):
//                the survivors' shrink fails naming it, a second shrink without it works
//   grow_kill    as kill_between, and the first newcomer dies inside the grow: the grow fails
//                naming it, a second grow with another newcomer works
//   mismatch     one survivor (--victim) passes another exclude list: every survivor's shrink fails
//   kill_two     --culprit and --victim die together: the errors list both, the recipe (shrink
//                without the first error's culprits) reaches a working group of the others
//   shrink_die   --culprit dies, --victim --hold-ms after its error, while the others shrink:
//                their shrink names it at once and the recipe's second shrink works
//   grow_root_dies  as kill_between up to the grow; then --victim, whose process hosts the grown
//                group's root (it called grow_id()), dies: the others name it and shrink
//   cycles       --cycles times: shrink without --culprit (alive), grow back with it; fds,
//                threads and this process's /dev/shm segments must not grow
//   newcomer, newcomer_dies, newcomer_root_dies   a restarted process joining a grown group as
//                --rank (the second dies in the group's setup, the third runs grow_root_dies)
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "faults.hpp"
#include "matrix.hpp"

namespace mpw {
namespace {

using std::chrono::milliseconds;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void die() {
  std::cout << "FAULT_AT " << now_ns() << std::endl;
  ::raise(SIGKILL);
  std::abort();
}

// Every collective (the data matrix, then the point-to-point one) on `c`, exact.
void matrix(Communicator& c, const Args& a, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  Matrix m(c, a, agree_seed(c, a.seed));
  m.run_all();
  m.run_p2p();
  std::cerr << "rank " << a.rank << " (rank " << c.rank() << " of " << c.world_size() << ") matrix on the " << what
            << " group passed in " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s" << std::endl;
}

// Loops all_reduce until the group fails; the error must name one of `dying` (default: the
// culprit). Those ranks themselves die between calls or, with `large`, inside one (the first of
// them; the others between calls). Returns the error's culprits().
std::vector<int> until_failure(Communicator& c, const Args& a, bool large, std::vector<int> dying = {}) {
  if (dying.empty()) dying = {a.culprit};
  const bool culprit = std::find(dying.begin(), dying.end(), c.rank()) != dying.end();
  std::thread timer;
  if (culprit && large)
    timer = std::thread([&] {
      std::this_thread::sleep_for(milliseconds(a.hold_ms));
      die();
    });
  std::vector<float> v(large ? (size_t{8} << 20) / 4 : 1024, 1.0f);
  try {
    for (int i = 0;; ++i) {
      if (culprit && !large && i == 20) die();
      c.all_reduce(v.data(), v.data(), v.size(), DataType::Float32, RedOp::Sum);
      if (v[0] != static_cast<float>(c.world_size())) throw Failure("rank " + std::to_string(a.rank) + ": wrong sum");
      std::fill(v.begin(), v.end(), 1.0f);
      if (i == 0) std::cout << "LOOPING" << std::endl;
    }
  } catch (const Failure&) {
    throw;
  } catch (const Error& e) {
    std::cerr << "rank " << a.rank << " got (culprit " << e.culprit() << "): " << e.what() << std::endl;
    if (culprit) die();  // another dying rank went first: the call it was in failed
    if (std::find(dying.begin(), dying.end(), e.culprit()) == dying.end() || !names_rank(e.what(), e.culprit()))
      throw Failure("rank " + std::to_string(a.rank) + ": the error does not name rank " + std::to_string(dying[0]) +
                    (dying.size() > 1 ? " or another dying rank" : ""));
    return e.culprits();
  }
  return {};
}

// The documented recipe (docs/elastic.md): shrink without every rank the error lists; a shrink
// that fails because another survivor died meanwhile names it (culprits()): again without it too.
std::unique_ptr<Communicator> shrink_without_lost(Communicator& c, std::vector<int> ex, const Args& a) {
  for (;;) {
    try {
      return c.shrink(ex, milliseconds(a.join_timeout_ms));
    } catch (const Error& e) {
      const size_t had = ex.size();
      for (int r : e.culprits())
        if (std::find(ex.begin(), ex.end(), r) == ex.end()) ex.push_back(r);
      std::cerr << "rank " << a.rank << ": shrink failed (culprits " << e.culprits().size() << "): " << e.what()
                << std::endl;
      if (ex.size() == had) throw;
      std::cout << "SHRINK_RETRY " << e.culprit() << std::endl;
    }
  }
}

// The error of a shrink or grow that must fail naming `who` (this group's numbering).
template <typename Fn>
void expect_failure_naming(int who, const Args& a, const char* what, Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    fn();
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << "rank " << a.rank << ": " << what << " failed after " << s << " s (culprit " << e.culprit()
              << "): " << e.what() << std::endl;
    if (e.culprit() != who || !names_rank(e.what(), who))
      throw Failure("rank " + std::to_string(a.rank) + ": the failed " + what + " does not name rank " +
                    std::to_string(who));
    return;
  }
  throw Failure("rank " + std::to_string(a.rank) + ": " + what + " succeeded although rank " + std::to_string(who) +
                " died in it");
}

// The shrunk group's rank 0 makes the grown group's id and prints it for the driver; every
// survivor takes its original rank back.
std::unique_ptr<Communicator> grow_back(Communicator& s, const Args& a) {
  std::optional<UniqueId> id;
  if (s.rank() == 0) {
    id = s.grow_id();
    std::cout << "GROW_ID " << id->to_string() << std::endl;
  }
  return s.grow(a.world, id, a.rank, milliseconds(a.join_timeout_ms));
}

// The last step of every scenario: the process hosting the group's root must not exit while
// another rank is still inside the last collective (the root-lifetime contract), so all ranks
// meet on the bootstrap first, whose answer outlives the root's exit in the socket buffers.
int finish(Communicator& c) {
  c.host_barrier();
  return 0;
}

void first_ok(Communicator& s) {
  small_all_reduce_check(s);
  std::cout << "FIRST_OK " << now_ns() << std::endl;
}

// Two ranks (--culprit, --victim) die together: every survivor's error names one of them, and
// soon lists both (the root reported both losses); the recipe reaches a working group of the
// others. shrink_die: --victim dies only once the others are inside the shrink (--hold-ms after
// its error); their shrink must name it within seconds, not at the join timeout.
int two_deaths(Communicator& c, const Args& a) {
  const bool together = a.phase == "kill_two";
  std::vector<int> dying = {a.culprit};
  if (together) dying.push_back(a.victim);
  std::vector<int> culprits = until_failure(c, a, false, dying);
  if (a.rank == a.victim) {
    std::this_thread::sleep_for(milliseconds(a.hold_ms));
    die();
  }
  if (together) {
    // The error raised at the first loss may know one; the group's later errors know both.
    for (int i = 0; i < 400 && culprits.size() < 2; ++i) {
      std::this_thread::sleep_for(milliseconds(5));
      try {
        c.check();
      } catch (const Error& e) {
        culprits = e.culprits();
      }
    }
    if (culprits != std::vector<int>{std::min(a.culprit, a.victim), std::max(a.culprit, a.victim)})
      throw Failure("rank " + std::to_string(a.rank) + ": the group's error does not list both dead ranks");
    culprits = {dying.front()};  // the recipe with the first error's culprit only: the shrink knows the rest
  }
  auto s = shrink_without_lost(c, culprits, a);
  if (s->world_size() != a.world - 2) throw Failure("rank " + std::to_string(a.rank) + ": the shrunk group has " +
                                                     std::to_string(s->world_size()) + " ranks");
  first_ok(*s);
  return finish(*s);
}

// A grown group's root lives in the member that called grow_id() (the shrunk group's rank 0):
// --victim, that member here, dies; every other member's error names it (not "the process that
// called UniqueId.create()"), and the shrink without it works. Newcomers run this too.
int grown_root_host_dies(Communicator& g, const Args& a) {
  small_all_reduce_check(g);
  auto culprits = until_failure(g, a, false, {a.victim});
  auto s = shrink_without_lost(g, culprits, a);
  first_ok(*s);
  return finish(*s);
}

int after_kill(Communicator& c, const Args& a) {
  const milliseconds jt(a.join_timeout_ms);
  std::unique_ptr<Communicator> s;
  if (a.phase == "shrink_kill") {
    if (a.rank == a.victim) arm_setup_fault("kill", "shm_open");
    expect_failure_naming(a.victim, a, "shrink", [&] { s = c.shrink({a.culprit}, jt); });
    s = c.shrink({a.culprit, a.victim}, jt);
    first_ok(*s);
    matrix(*s, a, "twice shrunk");
    return finish(*s);
  }
  s = c.shrink({a.culprit}, jt);
  first_ok(*s);
  if (a.phase == "trial") return finish(*s);
  if (a.phase == "grow_root_dies") return grown_root_host_dies(*grow_back(*s, a), a);
  matrix(*s, a, "shrunk");
  std::unique_ptr<Communicator> g;
  if (a.phase == "grow_kill") {
    expect_failure_naming(a.culprit, a, "grow", [&] { g = grow_back(*s, a); });
    small_all_reduce_check(*s);  // a failed grow leaves the shrunk group usable
  }
  g = grow_back(*s, a);
  small_all_reduce_check(*g);
  matrix(*g, a, "grown");
  return finish(*g);
}

int newcomer(const Args& a) {
  if (a.phase == "newcomer_dies") arm_setup_fault("kill", "shm_open");
  std::cout << "READY " << now_ns() << std::endl;
  Communicator c(UniqueId::parse(a.id), a.rank, a.world, options_for(a));
  if (a.phase == "newcomer_root_dies") return grown_root_host_dies(c, a);
  small_all_reduce_check(c);
  std::cout << "REJOINED " << now_ns() << std::endl;
  matrix(c, a, "grown");
  return finish(c);
}

// Survivors that disagree: --victim passes {--culprit, 1}, the others {--culprit}. The victim's
// shrink fails saying its list differs, the others' naming it as the rank that did not join; both
// within the join timeout. --culprit leaves cleanly.
int mismatch(Communicator& c, const Args& a) {
  small_all_reduce_check(c);
  if (a.rank == a.culprit) return 0;
  const milliseconds jt(a.join_timeout_ms);
  if (a.rank != a.victim) {
    expect_failure_naming(a.victim, a, "shrink", [&] { c.shrink({a.culprit}, jt); });
    return 0;
  }
  try {
    c.shrink({a.culprit, 1}, jt);
  } catch (const InvalidArgument& e) {
    std::cerr << "rank " << a.rank << ": " << e.what() << std::endl;
    if (std::string(e.what()).find("another exclude list") == std::string::npos)
      throw Failure("rank " + std::to_string(a.rank) + ": the refusal does not say why");
    return 0;
  }
  throw Failure("rank " + std::to_string(a.rank) + ": a shrink with another list than the others' succeeded");
}

int planned(Communicator& c, const Args& a) {
  const milliseconds jt(a.join_timeout_ms);
  for (int i = 0; i < 5; ++i) small_all_reduce_check(c);
  if (a.rank != a.culprit) {
    auto s = c.shrink({a.culprit}, jt);
    first_ok(*s);
    matrix(*s, a, "shrunk");
    // The excluded rank tries its calls meanwhile (its join for 1 s); the new group must not notice.
    std::this_thread::sleep_for(milliseconds(1500));
    small_all_reduce_check(*s);
    return finish(*s);
  }
  const std::string tag = "rank " + std::to_string(a.rank);
  auto refused = [&](const char* what, auto&& fn, ErrorCode code, const std::string& says) {
    try {
      fn();
    } catch (const Error& e) {
      std::cerr << tag << ": " << what << " -> " << e.what() << std::endl;
      if (e.code() != code || std::string(e.what()).find(says) == std::string::npos)
        throw Failure(tag + ": " + what + " failed, but not saying '" + says + "'");
      return;
    }
    throw Failure(tag + ": " + what + " was not refused");
  };
  refused("shrink without itself", [&] { c.shrink({a.culprit}, jt); }, ErrorCode::InvalidArgument, "exclude list");
  refused("a call on the old group", [&] { c.barrier(); }, ErrorCode::Remote, "revoked by shrink(exclude=[" + std::to_string(a.culprit) + "])");
  refused("joining the shrunk group", [&] { c.shrink({}, milliseconds(1000)); }, ErrorCode::InvalidArgument,
          "another exclude list");
  std::cout << "REFUSED" << std::endl;
  return 0;
}

struct Usage {
  int fds = 0, threads = 0, shm = 0;
  // At most what `o` had, give or take the root of one earlier group: a root ends (its thread
  // and sockets go) once the group's last rank has left, and the registry frees its wake-up pipe
  // (2 fds) when this process next starts a root. Anything left per cycle would show 19 times.
  bool operator<=(const Usage& o) const { return fds <= o.fds + 2 && threads <= o.threads + 1 && shm <= o.shm; }
};
int count_dir(const char* path, const std::string& suffix = "") {
  int n = 0;
  if (DIR* d = opendir(path)) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name[0] != '.' && (suffix.empty() || name.ends_with(suffix))) ++n;
    }
    closedir(d);
  }
  return n;
}
Usage usage() {
  return {count_dir("/proc/self/fd"), count_dir("/proc/self/task"), count_dir("/dev/shm", "-p" + std::to_string(::getpid()))};
}

// --cycles shrink/grow cycles: the survivors shrink without --culprit, which stays alive, closes
// its communicator and rejoins the grown group with the id rank 0 leaves in --dir.
int cycles(std::unique_ptr<Communicator> c, const Args& a) {
  const milliseconds jt(a.join_timeout_ms);
  std::optional<Usage> base;
  for (int k = 0; k < a.cycles; ++k) {
    small_all_reduce_check(*c);
    const std::string path = a.dir + "/cycle" + std::to_string(k);
    if (a.rank == a.culprit) {
      c.reset();
      for (int i = 0; !std::filesystem::exists(path); ++i) {
        if (i > 20000) throw Failure("no id for cycle " + std::to_string(k));
        std::this_thread::sleep_for(milliseconds(1));
      }
      std::ifstream in(path);
      std::string hex;
      in >> hex;
      c = std::make_unique<Communicator>(UniqueId::parse(hex), a.rank, a.world, options_for(a));
    } else {
      auto s = c->shrink({a.culprit}, jt);
      small_all_reduce_check(*s);
      std::optional<UniqueId> id;
      if (s->rank() == 0) {
        id = s->grow_id();
        std::ofstream(path + ".tmp") << id->to_string() << "\n";
        std::filesystem::rename(path + ".tmp", path);
      }
      c.reset();  // the revoked group: the grown one is made from the shrunk one
      c = s->grow(a.world, id, a.rank, jt);
    }
    if (k == 1) {  // after a whole cycle: the first one's roots are there to compare with
      small_all_reduce_check(*c);
      base = usage();
    }
  }
  small_all_reduce_check(*c);
  // Roots of earlier groups end once their last rank has left; give them a moment.
  Usage now = usage();
  for (int i = 0; i < 100 && !(now <= *base); ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    now = usage();
  }
  std::cout << "USAGE fds " << base->fds << "->" << now.fds << " threads " << base->threads << "->" << now.threads
            << " shm " << base->shm << "->" << now.shm << std::endl;
  if (!(now <= *base)) throw Failure("rank " + std::to_string(a.rank) + " leaked over the cycles");
  return finish(*c);
}

}  // namespace

int elastic_run(const Args& a) {
  if (a.phase.starts_with("newcomer")) return newcomer(a);
  auto c = make_comm(a);
  std::cout << "JOINED" << std::endl;
  if (a.phase == "planned") return planned(*c, a);
  if (a.phase == "mismatch") return mismatch(*c, a);
  if (a.phase == "cycles") return cycles(std::move(c), a);
  if (a.phase == "kill_two" || a.phase == "shrink_die") return two_deaths(*c, a);
  until_failure(*c, a, a.phase == "kill_large");
  return after_kill(*c, a);
}

}  // namespace mpw
