// mp_worker's suspend mode (Communicator::suspend / resume on the CPU backend), by --phase:
//   cycles   --cycles N suspend/resume cycles, each with exact all_reduce (one-shot and two-shot
//            sizes) and all_to_all before the suspend; while suspended the segment is unmapped
//            (no actorcc mapping in /proc/self/maps, shared RSS down by at least its pages),
//            mem_stats says so, every call is refused at once naming the suspension and check()
//            reports no error; file
//            descriptors, mappings and RSS do not grow over the cycles
//   again    every rank suspends twice: the second fails on every rank; then all resume
//   mixed    rank --culprit suspends again while the others resume: all fail naming it; then
//            every rank resumes and the group works
//   dies     rank --culprit is SIGKILLed while suspended: the others' resume fails within
//            seconds with a RemoteError naming it
#include <dirent.h>
#include <unistd.h>

#include <csignal>

#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

#include "faults.hpp"

namespace mpw {
namespace {

// /proc/self/maps lines of the group's segments (named "/dev/shm/actorcc-...", deleted since
// every rank mapped them).
int shm_mappings() {
  std::ifstream in("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find("/dev/shm/actorcc-") != std::string::npos) ++n;
  return n;
}

int all_mappings() {
  std::ifstream in("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

long status_kb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  return -1;
}

int open_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

void expect(bool ok, const std::string& what) {
  if (!ok) throw Failure(what);
}

// One-shot and two-shot all_reduce sizes and an all_to_all, every element checked exactly.
void exact_calls(Communicator& c, int cycle) {
  const int n = c.world_size(), me = c.rank();
  for (size_t count : {size_t{1000}, size_t{300000}}) {
    std::vector<int32_t> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = static_cast<int32_t>((me + 1) * 1000 + cycle * 7 + i % 97);
    c.all_reduce(v.data(), v.data(), count, DataType::Int32, RedOp::Sum);
    for (size_t i = 0; i < count; ++i) {
      const int32_t want = static_cast<int32_t>(1000 * n * (n + 1) / 2 + n * (cycle * 7 + static_cast<int>(i % 97)));
      if (v[i] != want)
        throw Failure("cycle " + std::to_string(cycle) + ": all_reduce of " + std::to_string(count) + " element " +
                      std::to_string(i) + " is " + std::to_string(v[i]) + ", want " + std::to_string(want));
    }
  }
  const size_t block = 513;
  std::vector<float> send(block * n), recv(block * n, -1.0f);
  for (int k = 0; k < n; ++k)
    for (size_t i = 0; i < block; ++i) send[k * block + i] = static_cast<float>(me * 100000 + k * 1000 + cycle + i % 7);
  c.all_to_all(send.data(), recv.data(), block, DataType::Float32);
  for (int k = 0; k < n; ++k)
    for (size_t i = 0; i < block; ++i)
      if (recv[k * block + i] != static_cast<float>(k * 100000 + me * 1000 + cycle + i % 7))
        throw Failure("cycle " + std::to_string(cycle) + ": all_to_all block " + std::to_string(k) + " is wrong");
}

// Every call while suspended fails at once, on this rank alone, saying so.
void expect_refused(Communicator& c, const std::string& tag) {
  std::vector<float> v(64, 1.0f);
  const int peer = (c.rank() + 1) % c.world_size();
  const std::vector<std::pair<const char*, std::function<void()>>> calls = {
      {"all_reduce", [&] { c.all_reduce(v.data(), v.data(), v.size(), DataType::Float32, RedOp::Sum); }},
      {"barrier", [&] { c.barrier(); }},
      {"send", [&] { c.send(v.data(), v.size(), DataType::Float32, peer); }},
      {"all_to_all", [&] { c.all_to_all(v.data(), v.data() + 32, 32 / c.world_size(), DataType::Float32); }},
      {"host_barrier", [&] { c.host_barrier(); }},
  };
  for (const auto& [name, call] : calls) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      call();
    } catch (const UnsupportedError& e) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::string what = e.what();
      expect(what.find("suspended") != std::string::npos && names_rank(what, c.rank()),
             tag + ": " + name + " while suspended: " + what);
      expect(s < 1.0, tag + ": " + name + " while suspended took " + std::to_string(s) + " s to be refused");
      continue;
    }
    throw Failure(tag + ": " + name + " ran while the communicator was suspended");
  }
  // A poll of the group's state (torch's watchdog, through ncclCommGetAsyncError) is no call.
  c.check();
  c.synchronize();
}

int cycles(Communicator& c, const Args& a, const std::string& tag) {
  exact_calls(c, -1);
  const std::string creator = "-p" + std::to_string(c.peers().at(0).pid);
  int fds1 = 0, maps1 = 0;
  long rss1 = 0;
  for (int k = 0; k < a.cycles; ++k) {
    exact_calls(c, k);
    const MemoryStats before = c.mem_stats();
    expect(!before.suspended && before.suspendable_bytes > 0, tag + ": mem_stats of an active communicator");
    expect(shm_mappings() == 1, tag + ": " + std::to_string(shm_mappings()) + " segment mappings while active");
    const long shared_before = status_kb("RssShmem");
    c.suspend();
    expect(c.suspended(), tag + ": suspended() is false after suspend()");
    const MemoryStats during = c.mem_stats();
    expect(during.suspended && during.suspendable_bytes == 0, tag + ": mem_stats while suspended");
    expect(shm_mappings() == 0, tag + ": the segment is still mapped while suspended");
    const long shared_during = status_kb("RssShmem");
    // This rank touched its own slots and its peers' (a two-shot all_reduce of 1.2 MB reads
    // every slot): at least a MiB of the segment was resident here.
    expect(shared_before - shared_during >= 1024,
           tag + ": shared RSS " + std::to_string(shared_before) + " -> " + std::to_string(shared_during) +
               " kB for a segment of " + std::to_string(before.suspendable_bytes >> 10) + " kB");
    // Nothing is left in /dev/shm under the group's creator either.
    if (DIR* d = opendir("/dev/shm")) {
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        expect(!(name.rfind("actorcc-", 0) == 0 && name.ends_with(creator)), tag + ": /dev/shm/" + name + " while suspended");
      }
      closedir(d);
    }
    expect_refused(c, tag + " cycle " + std::to_string(k));
    c.resume();
    expect(!c.suspended() && c.mem_stats().suspendable_bytes == before.suspendable_bytes,
           tag + ": mem_stats after resume");
    if (k == 0) {
      fds1 = open_fds();
      maps1 = all_mappings();
      rss1 = status_kb("RssAnon");
      if (a.rank == 0)
        std::cerr << tag << ": segment " << (before.suspendable_bytes >> 10) << " kB; shared RSS " << shared_before
                  << " -> " << shared_during << " kB while suspended" << std::endl;
    }
  }
  exact_calls(c, a.cycles);
  const int fds = open_fds(), maps = all_mappings();
  const long rss = status_kb("RssAnon");  // the segment's pages count in RssShmem
  std::cerr << tag << ": after " << a.cycles << " cycles: fds " << fds1 << " -> " << fds << ", mappings " << maps1
            << " -> " << maps << ", RssAnon " << rss1 << " -> " << rss << " kB" << std::endl;
  expect(fds == fds1, tag + ": file descriptors grew over the cycles");
  expect(maps <= maps1 + 2, tag + ": mappings grew over the cycles");
  expect(rss - rss1 < 2048, tag + ": RSS grew by " + std::to_string(rss - rss1) + " kB over the cycles");
  return 0;
}

// `call` must fail with an UnsupportedError whose text has `words` and names `culprit`.
void expect_unsupported(const std::function<void()>& call, const std::string& words, int culprit, const std::string& what) {
  try {
    call();
  } catch (const UnsupportedError& e) {
    expect(std::string(e.what()).find(words) != std::string::npos && names_rank(e.what(), culprit) &&
               e.culprit() == culprit,
           what + ": " + e.what());
    return;
  }
  throw Failure(what + " succeeded");
}

}  // namespace

int suspend_run(const Args& a) {
  Options o = options_for(a);
  Communicator c(UniqueId::parse(a.id), a.rank, a.world, o);
  std::cout << "JOINED" << std::endl;
  const std::string tag = "rank " + std::to_string(a.rank);
  if (a.phase == "cycles") return cycles(c, a, tag);
  exact_calls(c, 0);
  c.suspend();
  if (a.phase == "again") {
    expect_unsupported([&] { c.suspend(); }, "suspended already", 0, tag + ": a second suspend");
  } else if (a.phase == "mixed") {
    if (a.rank == a.culprit)
      expect_unsupported([&] { c.suspend(); }, "called resume", a.culprit == 0 ? 1 : 0, tag + ": suspend while the others resume");
    else
      expect_unsupported([&] { c.resume(); }, "called suspend", a.culprit, tag + ": resume while rank " + std::to_string(a.culprit) + " suspends");
  } else if (a.phase == "dies") {
    if (a.rank == a.culprit) {
      std::cout << "FAULT" << std::endl;
      raise(SIGKILL);
    }
    const auto t0 = std::chrono::steady_clock::now();
    try {
      c.resume();
    } catch (const RemoteError& e) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cerr << tag << " resume failed after " << s << " s: " << e.what() << std::endl;
      return e.culprit() == a.culprit && names_rank(e.what(), a.culprit) && s < 5.0 ? 0 : 3;
    }
    throw Failure(tag + ": resume succeeded with rank " + std::to_string(a.culprit) + " dead");
  } else {
    throw Failure("unknown suspend phase " + a.phase);
  }
  expect(c.suspended(), tag + ": the failed call left the communicator active");
  c.resume();
  exact_calls(c, 1);
  return 0;
}

}  // namespace mpw
