// actorcc-vmm-probe: can two processes on this host share GPU memory through CUDA VMM
// POSIX file descriptors, the way actorcc's IPC transport (and NCCL's cuMem path) does?
//
// The parent allocates with cuMemCreate (POSIX-fd handle type), writes a pattern, exports the
// handle as a file descriptor and passes it over a Unix socket (SCM_RIGHTS) to a child it
// spawns (this same binary, with --child). The child imports, maps, sets access for its own
// device and reads the pattern back. With --child-visible-devices the child gets its own
// CUDA_VISIBLE_DEVICES, so each process sees only its one GPU, as Ray actors do.
//
// Prints one JSON line; exit status 0 = works, 1 = failed, 2 = skipped (no GPU or driver).
// Driver functions come from cudaGetDriverEntryPointByVersion: no link against libcuda, so
// the binary starts (and exits 2) on machines without a driver.
#include <cuda.h>
#include <cuda_runtime.h>
#include <poll.h>
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
#include <string>
#include <vector>

extern char** environ;

namespace {

// ---- driver entry points (resolved at run time)
struct Driver {
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*DeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*GetErrorName)(CUresult, const char**);
  CUresult (*MemGetAllocationGranularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags);
  CUresult (*MemCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long);
  CUresult (*MemRelease)(CUmemGenericAllocationHandle);
  CUresult (*MemAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*MemAddressFree)(CUdeviceptr, size_t);
  CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*MemUnmap)(CUdeviceptr, size_t);
  CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
  CUresult (*MemExportToShareableHandle)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long);
  CUresult (*MemImportFromShareableHandle)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType);
};

std::string g_error;  // first failure, "step: reason"

template <typename F>
bool resolve(const char* name, F& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess || p == nullptr) {
    g_error = std::string("driver has no ") + name;
    return false;
  }
  fn = reinterpret_cast<F>(p);
  return true;
}

bool load(Driver& d) {
  return resolve("cuDeviceGet", d.DeviceGet) && resolve("cuDeviceGetAttribute", d.DeviceGetAttribute) &&
         resolve("cuGetErrorName", d.GetErrorName) &&
         resolve("cuMemGetAllocationGranularity", d.MemGetAllocationGranularity) &&
         resolve("cuMemCreate", d.MemCreate) && resolve("cuMemRelease", d.MemRelease) &&
         resolve("cuMemAddressReserve", d.MemAddressReserve) && resolve("cuMemAddressFree", d.MemAddressFree) &&
         resolve("cuMemMap", d.MemMap) && resolve("cuMemUnmap", d.MemUnmap) &&
         resolve("cuMemSetAccess", d.MemSetAccess) &&
         resolve("cuMemExportToShareableHandle", d.MemExportToShareableHandle) &&
         resolve("cuMemImportFromShareableHandle", d.MemImportFromShareableHandle);
}

Driver g_cu{};

bool cu_ok(CUresult r, const char* step) {
  if (r == CUDA_SUCCESS) return true;
  const char* name = "?";
  if (g_cu.GetErrorName) g_cu.GetErrorName(r, &name);
  if (g_error.empty()) g_error = std::string(step) + ": " + name + " (" + std::to_string(int(r)) + ")";
  return false;
}
bool rt_ok(cudaError_t r, const char* step) {
  if (r == cudaSuccess) return true;
  if (g_error.empty()) g_error = std::string(step) + ": " + cudaGetErrorName(r) + " (" + std::to_string(int(r)) + ")";
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
  CUdevice dev = 0;
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
  if (!load(g_cu)) return 1;
  if (!rt_ok(cudaSetDevice(0), "cudaSetDevice") || !rt_ok(cudaFree(nullptr), "cudaFree(0)")) return 1;
  if (!cu_ok(g_cu.DeviceGet(&g.dev, 0), "cuDeviceGet")) return 1;
  cudaDeviceGetPCIBusId(g.bus, sizeof g.bus, 0);
  int fd_ok = 0;
  g_cu.DeviceGetAttribute(&fd_ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, g.dev);
  if (!fd_ok) {
    g_error = "device does not support POSIX fd memory handles";
    return 1;
  }
  return 0;
}

CUmemAllocationProp prop_for(CUdevice dev) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

// Maps `h` (size bytes) and gives `dev` read/write access; returns 0 on failure.
CUdeviceptr map_rw(CUmemGenericAllocationHandle h, size_t bytes, CUdevice dev) {
  CUdeviceptr va = 0;
  if (!cu_ok(g_cu.MemAddressReserve(&va, bytes, 0, 0, 0), "cuMemAddressReserve")) return 0;
  if (!cu_ok(g_cu.MemMap(va, bytes, 0, h, 0), "cuMemMap")) return 0;
  CUmemAccessDesc a{};
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = dev;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (!cu_ok(g_cu.MemSetAccess(va, bytes, &a, 1), "cuMemSetAccess")) return 0;
  return va;
}

// ---- the socket: the fd rides in SCM_RIGHTS next to a small payload
struct Offer {
  uint64_t bytes;
};
struct Reply {
  int32_t ok;
  double import_ms;
  char bus[32];
  char error[224];
};

bool send_fd(int s, int fd, const Offer& o) {
  msghdr m{};
  iovec io{const_cast<Offer*>(&o), sizeof o};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char buf[CMSG_SPACE(sizeof(int))] = {};
  m.msg_control = buf;
  m.msg_controllen = sizeof buf;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(s, &m, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof o);
}

int recv_fd(int s, Offer& o) {
  msghdr m{};
  iovec io{&o, sizeof o};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char buf[CMSG_SPACE(sizeof(int))] = {};
  m.msg_control = buf;
  m.msg_controllen = sizeof buf;
  if (recvmsg(s, &m, MSG_WAITALL) != static_cast<ssize_t>(sizeof o)) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

bool wait_readable(int s, int timeout_ms) {
  pollfd p{s, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1;
}

// ---- child: import, map, set access, read the pattern
int child_main(int sock, int timeout_s) {
  alarm(timeout_s);  // never outlive a stuck parent
  Reply r{};
  Gpu g;
  int st = open_gpu(g);
  std::snprintf(r.bus, sizeof r.bus, "%s", g.bus);
  Offer o{};
  int fd = wait_readable(sock, timeout_s * 1000) ? recv_fd(sock, o) : -1;
  if (st == 0 && fd < 0) g_error = "no file descriptor from the parent";
  if (st == 0 && fd >= 0) {
    auto t0 = std::chrono::steady_clock::now();
    CUmemGenericAllocationHandle h{};
    CUdeviceptr va = 0;
    if (cu_ok(g_cu.MemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              "cuMemImportFromShareableHandle"))
      va = map_rw(h, o.bytes, g.dev);
    r.import_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (va) {
      std::vector<uint32_t> host(o.bytes / 4);
      if (rt_ok(cudaMemcpy(host.data(), reinterpret_cast<void*>(va), o.bytes, cudaMemcpyDeviceToHost),
                "cudaMemcpy from the imported memory")) {
        size_t bad = 0;
        for (size_t i = 0; i < host.size(); ++i) bad += host[i] != pattern(i);
        if (bad) g_error = "pattern mismatch in " + std::to_string(bad) + " of " + std::to_string(host.size()) + " words";
        r.ok = bad == 0;
      }
      g_cu.MemUnmap(va, o.bytes);
      g_cu.MemAddressFree(va, o.bytes);
      g_cu.MemRelease(h);
    }
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

int parent_main(const Args& a, const char* self) {
  Gpu g;
  int st = open_gpu(g);
  if (st) return finish(st, a, g, nullptr, 0);
  CUmemAllocationProp prop = prop_for(g.dev);
  size_t gran = 0;
  if (!cu_ok(g_cu.MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
             "cuMemGetAllocationGranularity"))
    return finish(1, a, g, nullptr, 0);
  size_t bytes = (a.bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h{};
  if (!cu_ok(g_cu.MemCreate(&h, bytes, &prop, 0), "cuMemCreate")) return finish(1, a, g, nullptr, bytes);
  CUdeviceptr va = map_rw(h, bytes, g.dev);
  if (!va) return finish(1, a, g, nullptr, bytes);
  std::vector<uint32_t> host(bytes / 4);
  for (size_t i = 0; i < host.size(); ++i) host[i] = pattern(i);
  if (!rt_ok(cudaMemcpy(reinterpret_cast<void*>(va), host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy"))
    return finish(1, a, g, nullptr, bytes);
  int fd = -1;
  if (!cu_ok(g_cu.MemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
             "cuMemExportToShareableHandle"))
    return finish(1, a, g, nullptr, bytes);

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    g_error = std::string("socketpair: ") + strerror(errno);
    return finish(1, a, g, nullptr, bytes);
  }
  // The child's end must survive exec: dup it without CLOEXEC.
  int child_end = dup(sv[1]);
  std::string fd_arg = std::to_string(child_end), t_arg = std::to_string(a.timeout_s);
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e)
    if (!a.child_cvd_set || std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env_store.emplace_back(*e);
  if (a.child_cvd_set) env_store.push_back("CUDA_VISIBLE_DEVICES=" + a.child_cvd);
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  const char* argv[] = {self, "--child", fd_arg.c_str(), "--timeout", t_arg.c_str(), nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, const_cast<char**>(argv), envp.data());
  close(child_end);
  close(sv[1]);
  if (rc != 0) {
    g_error = std::string("posix_spawn: ") + strerror(rc);
    return finish(1, a, g, nullptr, bytes);
  }
  Reply r{};
  bool got = false;
  if (send_fd(sv[0], fd, Offer{bytes}) && wait_readable(sv[0], a.timeout_s * 1000))
    got = read(sv[0], &r, sizeof r) == static_cast<ssize_t>(sizeof r);
  if (!got) {
    kill(pid, SIGKILL);
    if (g_error.empty()) g_error = "the importing process did not answer in " + std::to_string(a.timeout_s) + " s";
  }
  int wst = 0;
  waitpid(pid, &wst, 0);
  close(fd);
  g_cu.MemUnmap(va, bytes);
  g_cu.MemAddressFree(va, bytes);
  g_cu.MemRelease(h);
  if (got && !r.ok && r.error[0] == '\0') std::snprintf(r.error, sizeof r.error, "child failed");
  return finish(got && r.ok ? 0 : 1, a, g, got ? &r : nullptr, bytes);
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
