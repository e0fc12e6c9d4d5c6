// dlopen-based NCCL binding for the baseline (see nccl_loader.hpp). Compiled in CUDA builds;
// nccl.h supplies only the types and prototypes the function-pointer typedefs are made from.
#include "transport/nccl/nccl_loader.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/deadline.hpp"
#include "common/env.hpp"

#if ACTORCC_HAVE_NCCL_H
#include <nccl.h>
#endif

namespace actorcc::nccl {

std::string default_library() {
  // setting: ACTORCC_NCCL_LIB - path of the libnccl.so.2 to load (default: the loader's search)
  if (auto v = env::get("ACTORCC_NCCL_LIB")) return *v;
  return "libnccl.so.2";
}

#if ACTORCC_HAVE_NCCL_H

// The NCCL entry points actorcc calls: (field, symbol, required). One row per function gives
// both the member and its lookup; an optional one is null where the library lacks it.
#define ACTORCC_NCCL_FUNCTIONS(X)                                     \
  X(get_version, ncclGetVersion, true)                                \
  X(get_unique_id, ncclGetUniqueId, true)                             \
  X(comm_init_rank, ncclCommInitRank, true)                           \
  X(comm_destroy, ncclCommDestroy, true)                              \
  X(comm_abort, ncclCommAbort, true)                                  \
  X(comm_get_async_error, ncclCommGetAsyncError, true)                \
  X(get_error_string, ncclGetErrorString, true)                       \
  X(get_last_error, ncclGetLastError, false)                          \
  X(all_reduce, ncclAllReduce, true)                                  \
  X(reduce_scatter, ncclReduceScatter, true)                          \
  X(all_gather, ncclAllGather, true)                                  \
  X(broadcast, ncclBroadcast, true)                                   \
  X(reduce, ncclReduce, true)                                         \
  X(send, ncclSend, true)                                             \
  X(recv, ncclRecv, true)                                             \
  X(group_start, ncclGroupStart, true)                                \
  X(group_end, ncclGroupEnd, true)
#ifdef NCCL_WIN_COLL_SYMMETRIC
// NCCL >= 2.27: symmetric-memory windows, optional.
#define ACTORCC_NCCL_WINDOW_FUNCTIONS(X)                              \
  X(mem_alloc, ncclMemAlloc, false)                                   \
  X(mem_free, ncclMemFree, false)                                     \
  X(window_register, ncclCommWindowRegister, false)                   \
  X(window_deregister, ncclCommWindowDeregister, false)
#else
#define ACTORCC_NCCL_WINDOW_FUNCTIONS(X)
#endif

struct NcclLib::Fns {
#define ACTORCC_NCCL_FIELD(field, symbol, required) decltype(&symbol) field = nullptr;
  ACTORCC_NCCL_FUNCTIONS(ACTORCC_NCCL_FIELD)
  ACTORCC_NCCL_WINDOW_FUNCTIONS(ACTORCC_NCCL_FIELD)
#undef ACTORCC_NCCL_FIELD
};

namespace {

template <typename F>
void resolve(void* h, const char* name, F& out, bool required) {
  out = reinterpret_cast<F>(dlsym(h, name));
  if (!out && required) throw NcclError(std::string("NCCL library lacks ") + name);
}

ncclDataType_t to_nccl(DataType t) {
  switch (t) {
    case DataType::Float32: return ncclFloat32;
    case DataType::Float16: return ncclFloat16;
    case DataType::BFloat16: return ncclBfloat16;
    case DataType::Float64: return ncclFloat64;
    case DataType::Int8: return ncclInt8;
    case DataType::UInt8: return ncclUint8;
    case DataType::Int32: return ncclInt32;
    case DataType::Int64: return ncclInt64;
  }
  throw NcclError("dtype not supported by NCCL");
}

ncclRedOp_t to_nccl(RedOp op) {
  switch (op) {
    case RedOp::Sum: return ncclSum;
    case RedOp::Prod: return ncclProd;
    case RedOp::Min: return ncclMin;
    case RedOp::Max: return ncclMax;
    case RedOp::Avg: return ncclAvg;
  }
  throw NcclError("op not supported by NCCL");
}

void nck(const NcclLib::Fns& f, ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  std::string msg = std::string(what) + " failed: " + f.get_error_string(r);
  if (f.get_last_error) {
    const char* last = f.get_last_error(comm);
    if (last && *last) msg += std::string(" (") + last + ")";
  }
  throw NcclError(msg);
}

}  // namespace

namespace {

// actorcc's own NCCL-ABI library (nccl/: a libnccl.so.2 over actorcc) exports this marker. Loading
// it here would route actorcc's rails back into actorcc, so it is never taken as the NCCL.
constexpr const char* kAbiMarker = "ncclActorccVersion";
bool is_actorcc_abi(void* h) { return dlsym(h, kAbiMarker) != nullptr; }

// True when an actorcc NCCL-ABI library is in this process (preloaded, or this code is inside
// it): NVIDIA's NCCL is then opened with RTLD_DEEPBIND so its own calls to its public functions
// (its cleanup calls ncclCommDestroy, ...) bind inside it, never to the ABI library's.
bool abi_library_loaded() {
  if (dlsym(RTLD_DEFAULT, kAbiMarker)) return true;
  Dl_info self{};
  if (!dladdr(reinterpret_cast<void*>(&default_library), &self) || !self.dli_fname) return false;
  void* h = dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  const bool inside = h && is_actorcc_abi(h);
  if (h) dlclose(h);
  return inside;
}

// Where else NVIDIA's NCCL may be when the name resolves to the ABI library: the nvidia-nccl wheel
// beside the torch loaded in this process, then the directories of LD_LIBRARY_PATH and the
// usual system ones (each opened by its full path, which glibc loads as a separate object).
std::vector<std::string> other_candidates() {
  std::vector<std::string> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        const auto at = name.find("/torch/lib/");
        if (at != std::string::npos)
          static_cast<std::vector<std::string>*>(data)->push_back(name.substr(0, at) + "/nvidia/nccl/lib/libnccl.so.2");
        return 0;
      },
      &out);
  std::string dirs = env::get("LD_LIBRARY_PATH").value_or("");
  dirs += ":/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu:/usr/lib64:/usr/local/lib";
  size_t pos = 0;
  while (pos <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', pos), dirs.size());
    if (end > pos) out.push_back(dirs.substr(pos, end - pos) + "/libnccl.so.2");
    pos = end + 1;
  }
  return out;
}

// Opens `path` unless it is the ABI library; then the other candidates. Throws when only the
// ABI library was found.
void* open_nvidia_nccl(const std::string& path) {
  const int flags = RTLD_NOW | RTLD_LOCAL | (abi_library_loaded() ? RTLD_DEEPBIND : 0);
  void* h = dlopen(path.c_str(), flags);
  if (!h) {
    const char* e = dlerror();
    throw NcclError("cannot load NCCL from '" + path + "': " + (e ? e : "unknown error"));
  }
  if (!is_actorcc_abi(h)) return h;
  dlclose(h);
  for (const std::string& c : other_candidates()) {
    if (access(c.c_str(), R_OK) != 0) continue;
    void* o = dlopen(c.c_str(), flags);
    if (!o) continue;
    if (!is_actorcc_abi(o)) return o;
    dlclose(o);
  }
  throw NcclError("'" + path + "' is actorcc's own NCCL-ABI library (libnccl.so.2 over actorcc), not NVIDIA's NCCL, "
                  "and no NVIDIA NCCL was found beside torch or on the library path: set ACTORCC_NCCL_LIB to "
                  "NVIDIA's libnccl.so.2 (the nvidia-nccl wheel's nvidia/nccl/lib/libnccl.so.2) for groups across nodes");
}

}  // namespace

std::unique_ptr<NcclLib> NcclLib::load(const std::string& path) {
  void* h = open_nvidia_nccl(path);
  std::unique_ptr<NcclLib> lib(new NcclLib());
  lib->handle_ = h;
  lib->fns_ = std::make_unique<Fns>();
  Fns& f = *lib->fns_;
#define ACTORCC_NCCL_RESOLVE(field, symbol, required) resolve(h, #symbol, f.field, required);
  ACTORCC_NCCL_FUNCTIONS(ACTORCC_NCCL_RESOLVE)
  ACTORCC_NCCL_WINDOW_FUNCTIONS(ACTORCC_NCCL_RESOLVE)
#undef ACTORCC_NCCL_RESOLVE
  lib->path_ = path;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(f.get_version), &info) && info.dli_fname) lib->path_ = info.dli_fname;
  return lib;
}

NcclLib::~NcclLib() {
  // The handle stays open: NCCL keeps threads and atexit hooks that must outlive unloading.
}

std::string NcclLib::version() const {
  int v = 0;
  nck(*fns_, fns_->get_version(&v), "ncclGetVersion");
  // NCCL_VERSION: X*10000 + Y*100 + Z from 2.9 on, X*1000 + Y*100 + Z before.
  int major = v >= 10000 ? v / 10000 : v / 1000;
  int rest = v >= 10000 ? v % 10000 : v % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." + std::to_string(rest % 100);
}

std::string NcclLib::path() const { return path_; }

std::string NcclLib::unique_id() const {
  ncclUniqueId id;
  nck(*fns_, fns_->get_unique_id(&id), "ncclGetUniqueId");
  return std::string(id.internal, sizeof id.internal);
}

namespace {
ncclUniqueId to_uid(const std::string& id) {
  if (id.size() != sizeof(ncclUniqueId)) throw NcclError("bad NCCL unique id size");
  ncclUniqueId uid;
  std::copy(id.begin(), id.end(), uid.internal);
  return uid;
}

// One ncclCommInitRank on a helper thread, shared with the waiting thread until one of them
// takes the result: the waiter (done first) or the helper (abandoned first, then it aborts it).
struct InitJob {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false, abandoned = false;
  ncclResult_t result = ncclSuccess;
  ncclComm_t comm = nullptr;
};
}  // namespace

std::unique_ptr<NcclComm> NcclLib::init_rank(int world, const std::string& id, int rank) const {
  ncclComm_t comm = nullptr;
  nck(*fns_, fns_->comm_init_rank(&comm, world, to_uid(id), rank), "ncclCommInitRank");
  return std::make_unique<NcclComm>(*this, comm);
}

std::unique_ptr<NcclComm> NcclLib::init_rank(int world, const std::string& id, int rank, const NcclWait& wait) const {
  const ncclUniqueId uid = to_uid(id);
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) throw NcclError("cudaGetDevice failed before ncclCommInitRank");
  auto job = std::make_shared<InitJob>();
  // The helper holds its own copies: it may outlive this NcclLib (the handle is never closed).
  auto init = fns_->comm_init_rank;
  auto comm_abort = fns_->comm_abort;
  std::thread([job, init, comm_abort, world, uid, rank, device] {
    ncclComm_t comm = nullptr;
    const ncclResult_t r =
        cudaSetDevice(device) == cudaSuccess ? init(&comm, world, uid, rank) : ncclUnhandledCudaError;
    std::lock_guard<std::mutex> g(job->mu);
    if (job->abandoned) {
      if (r == ncclSuccess && comm) comm_abort(comm);
      return;
    }
    job->result = r;
    job->comm = comm;
    job->done = true;
    job->cv.notify_all();
  }).detach();

  const Deadline dl = Deadline::after(wait.limit);
  std::unique_lock<std::mutex> lk(job->mu);
  while (!job->cv.wait_for(lk, std::chrono::milliseconds(10), [&] { return job->done; })) {
    try {
      if (wait.check) wait.check();
      if (dl.expired())
        throw TimeoutError("NCCL setup (ncclCommInitRank) did not finish within " +
                               std::to_string(wait.limit.count() / 1000) +
                               " s: a rank has not reached it, has failed in it, or cannot reach this one over "
                               "NCCL's transports",
                           wait.rank);
    } catch (...) {
      job->abandoned = true;
      throw;
    }
  }
  nck(*fns_, job->result, "ncclCommInitRank");
  return std::make_unique<NcclComm>(*this, job->comm);
}

NcclComm::~NcclComm() {
  if (comm_) lib_.fns().comm_destroy(static_cast<ncclComm_t>(comm_));
}

void NcclComm::abort() {
  if (comm_) lib_.fns().comm_abort(static_cast<ncclComm_t>(comm_));
  comm_ = nullptr;
}

std::string NcclComm::async_error() const {
  if (!comm_) return {};
  const auto& f = lib_.fns();
  ncclResult_t state = ncclSuccess;
  auto comm = static_cast<ncclComm_t>(comm_);
  const ncclResult_t r = f.comm_get_async_error(comm, &state);
  if (r != ncclSuccess) return std::string("ncclCommGetAsyncError failed: ") + f.get_error_string(r);
  if (state == ncclSuccess || state == ncclInProgress) return {};
  std::string msg = f.get_error_string(state);
  if (f.get_last_error) {
    const char* last = f.get_last_error(comm);
    if (last && *last) msg += std::string(" (") + last + ")";
  }
  return msg;
}

void NcclComm::run(Collective c, const void* send, void* recv, size_t count, DataType t, RedOp op, int root,
                   void* stream) const {
  const auto& f = lib_.fns();
  auto comm = static_cast<ncclComm_t>(comm_);
  auto s = static_cast<cudaStream_t>(stream);
  switch (c) {
    case Collective::AllReduce:
      nck(f, f.all_reduce(send, recv, count, to_nccl(t), to_nccl(op), comm, s), "ncclAllReduce", comm);
      return;
    case Collective::ReduceScatter:
      nck(f, f.reduce_scatter(send, recv, count, to_nccl(t), to_nccl(op), comm, s), "ncclReduceScatter", comm);
      return;
    case Collective::AllGather:
      nck(f, f.all_gather(send, recv, count, to_nccl(t), comm, s), "ncclAllGather", comm);
      return;
    case Collective::Broadcast:
      nck(f, f.broadcast(send, recv, count, to_nccl(t), root, comm, s), "ncclBroadcast", comm);
      return;
    default: throw NcclError("collective not supported through NCCL");
  }
}

void NcclComm::transfers(const std::vector<Transfer>& xs, void* stream) const {
  const auto& f = lib_.fns();
  auto comm = static_cast<ncclComm_t>(comm_);
  auto s = static_cast<cudaStream_t>(stream);
  nck(f, f.group_start(), "ncclGroupStart", comm);
  try {
    for (const Transfer& x : xs) {
      if (x.send) nck(f, f.send(x.buf, x.count, to_nccl(x.dtype), x.peer, comm, s), "ncclSend", comm);
      else nck(f, f.recv(x.buf, x.count, to_nccl(x.dtype), x.peer, comm, s), "ncclRecv", comm);
    }
  } catch (...) {
    f.group_end();  // close the group whatever failed inside it
    throw;
  }
  nck(f, f.group_end(), "ncclGroupEnd", comm);
}

void NcclComm::reduce(const void* send, void* recv, size_t count, DataType t, RedOp op, int root, void* stream) const {
  const auto& f = lib_.fns();
  auto comm = static_cast<ncclComm_t>(comm_);
  nck(f, f.reduce(send, recv, count, to_nccl(t), to_nccl(op), root, comm, static_cast<cudaStream_t>(stream)),
      "ncclReduce", comm);
}

#ifdef NCCL_WIN_COLL_SYMMETRIC
namespace {
void need_windows(const NcclLib::Fns& f) {
  if (!f.mem_alloc || !f.mem_free || !f.window_register || !f.window_deregister)
    throw NcclError("this NCCL has no symmetric-memory windows (needs NCCL >= 2.27)");
}
}  // namespace

void* NcclLib::mem_alloc(size_t bytes) const {
  const auto& f = *fns_;
  need_windows(f);
  void* p = nullptr;
  nck(f, f.mem_alloc(&p, bytes), "ncclMemAlloc");
  return p;
}
void NcclLib::mem_free(void* p) const {
  const auto& f = *fns_;
  if (p && f.mem_free) f.mem_free(p);
}
void* NcclComm::window_register(void* p, size_t bytes) const {
  const auto& f = lib_.fns();
  need_windows(f);
  ncclWindow_t win = nullptr;
  auto comm = static_cast<ncclComm_t>(comm_);
  nck(f, f.window_register(comm, p, bytes, &win, NCCL_WIN_COLL_SYMMETRIC), "ncclCommWindowRegister", comm);
  return win;
}
void NcclComm::window_deregister(void* win) const {
  const auto& f = lib_.fns();
  if (win && f.window_deregister && comm_)
    f.window_deregister(static_cast<ncclComm_t>(comm_), static_cast<ncclWindow_t>(win));
}
#else
void* NcclLib::mem_alloc(size_t) const { throw NcclError("built with an nccl.h without windows"); }
void NcclLib::mem_free(void*) const {}
void* NcclComm::window_register(void*, size_t) const {
  throw NcclError("built with an nccl.h without windows");
}
void NcclComm::window_deregister(void*) const {}
#endif

#else  // no nccl.h at build time: the baseline reports why it cannot run

struct NcclLib::Fns {};
std::unique_ptr<NcclLib> NcclLib::load(const std::string&) {
  throw NcclError("actorcc was built without nccl.h (no NCCL support)");
}
NcclLib::~NcclLib() {}
std::string NcclLib::version() const { return ""; }
std::string NcclLib::path() const { return path_; }
std::string NcclLib::unique_id() const { return ""; }
std::unique_ptr<NcclComm> NcclLib::init_rank(int, const std::string&, int) const { return nullptr; }
std::unique_ptr<NcclComm> NcclLib::init_rank(int, const std::string&, int, const NcclWait&) const { return nullptr; }
NcclComm::~NcclComm() {}
void NcclComm::abort() {}
std::string NcclComm::async_error() const { return {}; }
void NcclComm::run(Collective, const void*, void*, size_t, DataType, RedOp, int, void*) const {}
void NcclComm::transfers(const std::vector<Transfer>&, void*) const {}
void NcclComm::reduce(const void*, void*, size_t, DataType, RedOp, int, void*) const {}
void* NcclLib::mem_alloc(size_t) const { return nullptr; }
void NcclLib::mem_free(void*) const {}
void* NcclComm::window_register(void*, size_t) const { return nullptr; }
void NcclComm::window_deregister(void*) const {}

#endif

}  // namespace actorcc::nccl
