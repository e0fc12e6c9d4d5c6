// The fault and error modes of mp_worker: a rank killed, stopped, exiting or throwing at a
// phase (fault_run); survivors looping until the error that names it; point-to-point calls
// that disagree; calls a group spanning nodes refuses.
#include "faults.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <functional>
#include <iostream>
#include <thread>
#include <utility>

namespace mpw {

// Loops all_reduce until the expected RemoteError arrives. Returns the exit code.
int loop_until_remote_error(Communicator& c, int culprit, const std::string& tag, bool a2a) {
  std::vector<float> v(4099 * c.world_size(), 1.0f), out(v.size());
  bool announced = false;
  try {
    for (;;) {
      if (a2a) c.all_to_all(v.data(), out.data(), 4099, DataType::Float32);
      else c.all_reduce(v.data(), v.data(), 4099, DataType::Float32, RedOp::Sum);
      std::fill(v.begin(), v.end(), 1.0f);
      if (!announced) {
        std::cout << "LOOPING" << std::endl;
        announced = true;
      }
    }
  } catch (const RemoteError& e) {
    // Across nodes the first rank whose TCP rail to the dead rank broke may abort the group
    // before the root's news of the death arrives: its abort carries the dead rank as culprit.
    std::cerr << tag << " got RemoteError culprit=" << e.culprit() << ": " << e.what() << std::endl;
    return e.culprit() == culprit ? 0 : 3;
  } catch (const TimeoutError& e) {
    // A stalled (not dead) peer: the first rank to time out names it; the others then get the
    // RemoteError above through the shared abort word, or time out themselves.
    std::cerr << tag << " got TimeoutError culprit=" << e.culprit() << ": " << e.what() << std::endl;
    const std::string want = "rank(s) " + std::to_string(culprit);
    return std::string(e.what()).find(want) != std::string::npos && e.culprit() == culprit ? 0 : 3;
  }
}

// ---------------------------------------------------------------------------------------
// Fault injection.

// The fault happens here and now, in this thread. "exit" is a process exit without closing
// the communicator (its clean leave, in the between_calls phase, is the caller's return).
[[noreturn]] static void inject(const std::string& kind) {
  std::cout << "FAULT" << std::endl;
  if (kind == "kill") ::raise(SIGKILL);
  if (kind == "stop") {
    ::raise(SIGSTOP);  // the driver SIGKILLs it once the others have reported
    ::pause();
  }
  if (kind == "throw") std::thread([] { throw std::runtime_error("injected uncaught exception"); }).join();
  std::exit(0);
}

bool names_rank(const std::string& text, int r) {
  bool listing = false;
  std::string tok;
  auto flush = [&]() {
    if (tok.empty()) return false;
    bool hit = false;
    if (tok.rfind("rank", 0) == 0) listing = true;
    else if (std::all_of(tok.begin(), tok.end(), ::isdigit)) hit = listing && std::stoi(tok) == r;
    else if (tok != "s") listing = false;
    tok.clear();
    return hit;
  };
  for (char ch : text + " ") {
    if (std::isalnum(static_cast<unsigned char>(ch))) tok.push_back(ch);
    else if (flush()) return true;
  }
  return false;
}


// Faults during backend setup, after the join. Setup is not visible through the public API, so
// this worker interposes the C library calls that mark its steps: shm_open (the CPU backend's
// shared memory: the creator makes the segment, which then exists in /dev/shm, the others map
// it) and listen (the TCP mesh between virtual nodes: the root lives in the driver process, so a
// worker listens for nothing else). The executable's definitions come first in the dynamic
// lookup, so the library's calls land in them; each calls the real function (the next
// definition), then injects the fault once, on the culprit only.
namespace {
struct SetupFault {
  std::string fault, at;  // set before joining by the culprit of a during_setup / during_mesh case
  int skip = 0;  // calls of `at` to let pass first
  std::atomic<bool> fired{false};
  void after(const char* call) {
    if (fault.empty() || at != call) return;
    if (skip > 0) {
      --skip;
      return;
    }
    if (!fired.exchange(true)) inject(fault);
  }
};
SetupFault setup_fault;
}  // namespace

void arm_setup_fault(const std::string& fault, const std::string& at) {
  setup_fault.at = at;
  setup_fault.fault = fault;
}

namespace {

template <typename Fn>
Fn real_function(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}
}  // namespace

}  // namespace mpw

namespace mpw {
namespace {
std::function<void(const char*)> before_open;  // arm_before_shm_open's action, run once
std::atomic<bool> before_open_fired{false};
}  // namespace

void arm_before_shm_open(std::function<void(const char*)> action) { before_open = std::move(action); }
}  // namespace mpw

extern "C" int shm_open(const char* name, int oflag, mode_t mode) {
  static auto real = mpw::real_function<int (*)(const char*, int, mode_t)>("shm_open");
  if (!(oflag & O_CREAT) && mpw::before_open && !mpw::before_open_fired.exchange(true)) mpw::before_open(name);
  const int fd = real(name, oflag, mode);
  mpw::setup_fault.after("shm_open");
  return fd;
}

extern "C" int listen(int fd, int backlog) noexcept {
  static auto real = mpw::real_function<int (*)(int, int)>("listen");
  const int rc = real(fd, backlog);
  mpw::setup_fault.after("listen");
  return rc;
}

namespace mpw {

// Both sides of a fault run. Returns the exit code (survivors: 0 when the error names it).
int fault_run(const Args& a) {
  const std::string tag = "rank " + std::to_string(a.rank);
  const bool culprit = a.rank == a.culprit;
  if (culprit && a.phase == "before_join") inject(a.fault);
  if (culprit && (a.phase == "during_setup" || a.phase == "during_mesh")) {
    setup_fault.at = a.phase == "during_setup" ? "shm_open" : "listen";
    // A rank's first listen reserves its successor socket, before it joins (docs/elastic.md);
    // the mesh's listener is the next one.
    setup_fault.skip = a.phase == "during_mesh" ? 1 : 0;
    setup_fault.fault = a.fault;
  }
  std::thread timer;
  if (culprit && (a.phase == "during_join" || a.phase == "large_call"))
    timer = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(a.hold_ms));
      inject(a.fault);
    });
  const auto t0 = std::chrono::steady_clock::now();
  try {
    auto c = make_comm(a);
    std::cout << "JOINED" << std::endl;
    const size_t n = a.phase == "large_call" ? (size_t{8} << 20) / 4 : 1024;  // 8 MiB: many rounds
    std::vector<float> v(n, 1.0f);
    for (int i = 0;; ++i) {
      if (culprit && a.phase == "between_calls" && i == 20) {
        if (a.fault == "exit") {
          std::cout << "FAULT" << std::endl;
          return 0;  // closes the communicator: a clean leave
        }
        inject(a.fault);
      }
      c->all_reduce(v.data(), v.data(), v.size(), DataType::Float32, RedOp::Sum);
      std::fill(v.begin(), v.end(), 1.0f);
      if (i == 0) std::cout << "LOOPING" << std::endl;
      if (culprit && a.phase == "between_calls") std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << tag << " got " << to_string(e.code()) << " (culprit " << e.culprit() << ") after " << s
              << " s: " << e.what() << std::endl;
    if (culprit) return 3;
    // Named in the text and as the error's culprit, however the news came (a timeout here, the
    // shared abort word, another rank's abort through the root, the root's report of a death).
    return names_rank(e.what(), a.culprit) && e.culprit() == a.culprit ? 0 : 3;
  }
}

// The link between (virtual) nodes is cut while every rank loops all_reduce (driven by
// tcp_nodes.sh netns): every rank must fail naming a rank of the other node, and exit.
int link_cut_run(const Args& a) {
  const std::string tag = "rank " + std::to_string(a.rank);
  auto c = make_comm(a);
  std::vector<int> far;  // the ranks on other nodes
  for (const auto& p : c->peers())
    if (p.node != c->peers()[a.rank].node) far.push_back(p.rank);
  if (far.empty()) throw Failure(tag + ": the group does not span nodes");
  std::vector<float> v((size_t{1} << 20) / 4, 1.0f);
  std::chrono::steady_clock::time_point t0;
  try {
    for (int i = 0;; ++i) {
      t0 = std::chrono::steady_clock::now();
      c->all_reduce(v.data(), v.data(), v.size(), DataType::Float32, RedOp::Sum);
      if (v[0] != static_cast<float>(a.world)) throw Failure(tag + ": wrong sum before the cut");
      std::fill(v.begin(), v.end(), 1.0f);
      if (i == 0) std::cout << "LOOPING" << std::endl;
    }
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << tag << " got " << to_string(e.code()) << " after " << s << " s in the call: " << e.what() << std::endl;
    for (int r : far)
      if (names_rank(e.what(), r)) return 0;
    std::cerr << tag << ": the error names no rank of the other node" << std::endl;
    return 3;
  }
}

// Point-to-point calls that disagree across ranks (--expect says how): every rank must fail
// with an error (printed to stderr for the driver to check) within the timeout.
//   count: rank 0 sends 100 float32 to rank 1, which receives 50
//   dtype: rank 0 sends 100 float32 to rank 1, which receives 100 int32
//   peer:  world 3, a cycle of waits: 0 sends to 1, 1 receives from 2, 2 receives from 0
//   a2av:  all_to_all_v where rank 0 expects one element fewer from rank 2 than rank 2 sends
int p2p_mismatch(Communicator& c, const Args& a, const std::string& tag) {
  std::vector<float> f(100, 1.0f);
  std::vector<int32_t> i32(100, 0);
  const int me = c.rank(), n = c.world_size();
  try {
    if (a.expect == "count" || a.expect == "dtype") {
      if (me == 0) c.send(f.data(), 100, DataType::Float32, 1);
      else if (me == 1 && a.expect == "count") c.recv(f.data(), 50, DataType::Float32, 0);
      else if (me == 1) c.recv(i32.data(), 100, DataType::Int32, 0);
      else c.barrier();
    } else if (a.expect == "peer") {
      if (me == 0) c.send(f.data(), 100, DataType::Float32, 1);
      else if (me == 1) c.recv(f.data(), 100, DataType::Float32, 2);
      else c.recv(f.data(), 100, DataType::Float32, 0);
    } else if (a.expect == "a2av") {
      std::vector<size_t> sc(n, 3), rc(n, 3);
      if (me == 2) sc[0] = 5;
      if (me == 0) rc[2] = 4;
      std::vector<float> in(3 * n + 2), out(3 * n + 2);
      c.all_to_all_v(in.data(), sc, out.data(), rc, DataType::Float32);
    }
  } catch (const Error& e) {
    std::cerr << tag << " failed as expected (" << to_string(e.code()) << "): " << e.what() << std::endl;
    // The group is poisoned: a later call fails at once instead of hanging.
    try {
      c.barrier();
    } catch (const Error& later) {
      std::cerr << tag << " later call: " << later.what() << std::endl;
      return 0;
    }
    std::cerr << tag << " a later call succeeded on a poisoned group" << std::endl;
    return 3;
  }
  // A rank whose own transfers matched may finish; the group must still be poisoned for it.
  try {
    c.barrier();
  } catch (const Error& later) {
    std::cerr << tag << " completed its own matching transfers; later call: " << later.what() << std::endl;
    return 0;
  }
  std::cerr << tag << " completed although the calls disagree, and the group still works" << std::endl;
  return 3;
}


}  // namespace mpw
