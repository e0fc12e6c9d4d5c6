// actorcc-vmm-probe: can two processes on this host share GPU memory through CUDA VMM POSIX
// file descriptors, the way actorcc's IPC transport (and NCCL's cuMem path) does? It runs the
// transport itself (transport/ipc: VmmRegion, the Unix-socket fd passing), so a pass here means
// the library's own path works.
//
// The parent allocates an exportable region, writes a pattern, exports the handle as a file
// descriptor and passes it over a Unix socket (SCM_RIGHTS) to a child it spawns (this same
// binary, with --child). The child imports, maps, sets access for its own device and reads the
// pattern back. With --child-visible-devices the child gets its own CUDA_VISIBLE_DEVICES, so each
// process sees only its one GPU, as Ray actors do.
//
// Prints one JSON line; exit status 0 = works, 1 = failed, 2 = skipped (no GPU or driver).
// Driver functions come from cudaGetDriverEntryPointByVersion (transport/ipc/driver_api): no
// link against libcuda, so the binary starts (and exits 2) on machines without a driver.
#include <cuda.h>
#include <cuda_runtime.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "common/deadline.hpp"
#include "transport/ipc/driver_api.hpp"
#include "transport/ipc/uds.hpp"
#include "transport/ipc/vmm.hpp"

extern char** environ;

namespace {

using actorcc::Deadline;
using actorcc::UniqueFd;
namespace ipc = actorcc::ipc;

std::string g_error;  // first failure, "step: reason"

void fail(const std::string& why) {
  if (g_error.empty()) g_error = why;
}

bool rt_ok(cudaError_t r, const char* step) {
  if (r == cudaSuccess) return true;
  fail(std::string(step) + ": " + cudaGetErrorName(r) + " (" + std::to_string(int(r)) + ")");
  return false;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o + "\"";
}

uint32_t pattern(size_t i) { return uint32_t(i * 2654435761u) ^ 0x5a5a0000u; }

// ---- this process's GPU
struct Gpu {
  char bus[32] = "";
};

// 2 = no GPU or driver (skip), 1 = failure, 0 = ready.
int open_gpu(Gpu& g) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    g_error = std::string("no GPU: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 2;
  }
  const auto& drv = ipc::DriverApi::get();
  if (!drv.ok) {
    fail(drv.error);
    return 1;
  }
  if (!rt_ok(cudaSetDevice(0), "cudaSetDevice") || !rt_ok(cudaFree(nullptr), "cudaFree(0)")) return 1;
  cudaDeviceGetPCIBusId(g.bus, sizeof g.bus, 0);
  int fd_ok = 0;
  CUdevice dev = 0;
  if (drv.cuDeviceGet(&dev, 0) == CUDA_SUCCESS)
    drv.cuDeviceGetAttribute(&fd_ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev);
  if (!fd_ok) {
    fail("device does not support POSIX fd memory handles");
    return 1;
  }
  return 0;
}

// ---- what travels over the socket: the fd rides beside Offer; Reply comes back
struct Offer {
  uint64_t bytes;
};
struct Reply {
  int32_t ok;
  double import_ms;
  char bus[32];
  char error[224];
};

// ---- child: import, map, set access, read the pattern
int child_main(int sock, int timeout_s) {
  alarm(timeout_s);  // never outlive a stuck parent
  Reply r{};
  Gpu g;
  int st = open_gpu(g);
  std::snprintf(r.bus, sizeof r.bus, "%s", g.bus);
  try {
    Offer o{};
    UniqueFd fd = ipc::uds_recv(sock, &o, sizeof o, Deadline::after(std::chrono::seconds(timeout_s)));
    if (st == 0 && !fd.valid()) fail("no file descriptor from the parent");
    if (st == 0 && fd.valid()) {
      auto t0 = std::chrono::steady_clock::now();
      ipc::VmmRegion region = ipc::VmmRegion::import(fd.get(), o.bytes, 0);
      r.import_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::vector<uint32_t> host(o.bytes / 4);
      if (rt_ok(cudaMemcpy(host.data(), region.ptr(), o.bytes, cudaMemcpyDeviceToHost),
                "cudaMemcpy from the imported memory")) {
        size_t bad = 0;
        for (size_t i = 0; i < host.size(); ++i) bad += host[i] != pattern(i);
        if (bad) fail("pattern mismatch in " + std::to_string(bad) + " of " + std::to_string(host.size()) + " words");
        r.ok = bad == 0;
      }
    }
  } catch (const std::exception& e) {
    fail(e.what());
    r.ok = 0;
  }
  std::snprintf(r.error, sizeof r.error, "%s", g_error.c_str());
  ssize_t w = write(sock, &r, sizeof r);
  (void)w;
  return r.ok ? 0 : 1;
}

// ---- parent
struct Args {
  std::string child_cvd;  // empty: the child inherits this process's CUDA_VISIBLE_DEVICES
  bool child_cvd_set = false;
  size_t bytes = 32u << 20;
  int timeout_s = 30;
};

int finish(int code, const Args& a, const Gpu& g, const Reply* r, size_t bytes) {
  const char* cvd = getenv("CUDA_VISIBLE_DEVICES");
  std::string child_cvd = a.child_cvd_set ? a.child_cvd : (cvd ? cvd : "");
  std::string err = !g_error.empty() ? g_error : (r && r->error[0] ? r->error : "");
  const char* status = code == 0 ? "ok" : code == 2 ? "skipped" : "failed";
  std::printf("{\"status\":\"%s\",\"detail\":%s,\"bytes\":%zu,"
              "\"exporter\":{\"pci_bus_id\":%s,\"visible_devices\":%s},"
              "\"importer\":{\"pci_bus_id\":%s,\"visible_devices\":%s},\"import_ms\":%.3f}\n",
              status, json_str(code == 0 ? "import + map + access + read ok" : err).c_str(), bytes,
              json_str(g.bus).c_str(), json_str(cvd ? cvd : "").c_str(), json_str(r ? r->bus : "").c_str(),
              json_str(child_cvd).c_str(), r ? r->import_ms : 0.0);
  return code;
}

// Spawns this binary as the importing child on the socket `child_end`; -1 on failure.
pid_t spawn_child(const Args& a, const char* self, int child_end) {
  const std::string fd_arg = std::to_string(child_end), t_arg = std::to_string(a.timeout_s);
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e)
    if (!a.child_cvd_set || std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env_store.emplace_back(*e);
  if (a.child_cvd_set) env_store.push_back("CUDA_VISIBLE_DEVICES=" + a.child_cvd);
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  const char* argv[] = {self, "--child", fd_arg.c_str(), "--timeout", t_arg.c_str(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, const_cast<char**>(argv), envp.data());
  if (rc != 0) {
    fail(std::string("posix_spawn: ") + strerror(rc));
    return -1;
  }
  return pid;
}

int parent_main(const Args& a, const char* self) {
  Gpu g;
  int st = open_gpu(g);
  if (st) return finish(st, a, g, nullptr, 0);
  size_t bytes = 0;
  try {
    ipc::VmmRegion region = ipc::VmmRegion::allocate(a.bytes, 0);
    bytes = region.size();
    std::vector<uint32_t> host(bytes / 4);
    for (size_t i = 0; i < host.size(); ++i) host[i] = pattern(i);
    if (!rt_ok(cudaMemcpy(region.ptr(), host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy"))
      return finish(1, a, g, nullptr, bytes);
    UniqueFd fd = region.export_fd();

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      fail(std::string("socketpair: ") + strerror(errno));
      return finish(1, a, g, nullptr, bytes);
    }
    UniqueFd mine(sv[0]), theirs(sv[1]);
    // The child's end must survive exec: a duplicate without CLOEXEC.
    const pid_t pid = [&] {
      UniqueFd child_end(dup(theirs.get()));
      return spawn_child(a, self, child_end.get());
    }();
    theirs.reset();
    if (pid < 0) return finish(1, a, g, nullptr, bytes);
    Reply r{};
    bool got = false;
    try {
      const Offer o{bytes};
      ipc::uds_send(mine.get(), &o, sizeof o, fd.get());
      ipc::uds_recv(mine.get(), &r, sizeof r, Deadline::after(std::chrono::seconds(a.timeout_s)));
      got = true;
    } catch (const std::exception& e) {
      fail(std::string("the importing process did not answer in ") + std::to_string(a.timeout_s) + " s (" +
           e.what() + ")");
    }
    if (!got) kill(pid, SIGKILL);
    int wst = 0;
    waitpid(pid, &wst, 0);
    if (got && !r.ok && r.error[0] == '\0') std::snprintf(r.error, sizeof r.error, "child failed");
    return finish(got && r.ok ? 0 : 1, a, g, got ? &r : nullptr, bytes);
  } catch (const std::exception& e) {
    fail(e.what());
    return finish(1, a, g, nullptr, bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  int child_sock = -1;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (k == "--child" && v) child_sock = std::atoi(argv[++i]);
    else if (k == "--child-visible-devices" && v) a.child_cvd = argv[++i], a.child_cvd_set = true;
    else if (k == "--bytes" && v) a.bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (k == "--timeout" && v) a.timeout_s = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: %s [--child-visible-devices CVD] [--bytes N] [--timeout S]\n"
                   "Checks that a second process can import this process's GPU memory through a CUDA VMM\n"
                   "POSIX fd. Prints one JSON line; exit 0 works, 1 fails, 2 no GPU.\n",
                   argv[0]);
      return 64;
    }
  }
  if (child_sock >= 0) return child_main(child_sock, a.timeout_s);
  return parent_main(a, argv[0]);
}
