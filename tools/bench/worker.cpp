// One rank of a benchmark run (started by the launcher with --worker). It joins the actorcc
// group with the launcher's UniqueId, then runs the sweep for each implementation in turn:
// actorcc through the public Communicator API, and NCCL (dlopen) with its unique id shared over
// Communicator::allgather_bytes. Every per-size figure is taken as the max over ranks; rank 0
// writes the rows to <run-dir>/results.tsv for the launcher.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "actorcc/actorcc.hpp"
#include "algorithms/p2p_plan.hpp"
#include "bench.hpp"
#include "gpu.hpp"
#include "host_data.hpp"
#include "transport/nccl/nccl_loader.hpp"
#include "report.hpp"
#include "settle.hpp"

namespace actorcc::bench {
using nccl::NcclComm;
using nccl::NcclLib;
namespace {

int64_t wall_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}
double steady_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

// <run-dir>/rank<R>.status: "<seq>\t<what>", replaced atomically; the launcher reads it to see
// progress and to say where a failed or hung rank was.
class Status {
 public:
  Status(const std::string& dir, int rank)
      : path_(dir + "/rank" + std::to_string(rank) + ".status"), tmp_(path_ + ".tmp") {}
  void set(const std::string& what) {
    if (path_.empty()) return;
    {
      std::ofstream f(tmp_, std::ios::trunc);
      f << ++seq_ << "\t" << what << "\n";
    }
    std::rename(tmp_.c_str(), path_.c_str());
  }

 private:
  std::string path_, tmp_;
  uint64_t seq_ = 0;
};

// One implementation under test: how to run one collective, and its two buffers.
struct Impl {
  std::string name;
  std::function<void(const void* send, void* recv, size_t count)> call;
  std::function<std::string(size_t bytes)> algo;  // what the planner runs for a call of `bytes` (or none)
  void* a = nullptr;  // send buffer (in place: the only buffer)
  void* b = nullptr;  // receive buffer
};

// Where the inputs and outputs of one call lie, for one message size.
struct Layout {
  size_t bytes = 0;   // the table's size: the full buffer (nccl-tests convention)
  size_t count = 0;   // elements of the full buffer
  size_t chunk = 0;   // reduce_scatter/all_gather: elements per rank
  size_t arg = 0;     // the count passed to the call
  char* send = nullptr;
  char* recv = nullptr;
  size_t in_count = 0;   // elements of `send` this rank provides
  size_t out_count = 0;  // elements of `recv` to check
};

class Worker {
 public:
  explicit Worker(const Config& c) : c_(c), status_(c.run_dir, c.rank) {}
  ~Worker() {
#ifdef ACTORCC_WITH_CUDA
    nccl_.reset();
#endif
    comm_.reset();
    if (stream_) gpu::stream_destroy(stream_);
  }

  void run();
  void abort(const std::string& why) {
    if (comm_) {
      try {
        comm_->abort(why);
      } catch (...) {
      }
    }
  }
  std::string where() const { return where_; }

 private:
  void phase(const std::string& what) {
    where_ = what;
    status_.set(what);
  }
  void settle(Impl& impl, const std::vector<size_t>& sizes);
  void sync() {
    if (gpu_) gpu::stream_sync(stream_);
  }
  void* alloc(size_t bytes);
  void release(void* p);
  Layout layout(const Impl& impl, size_t bytes) const;
  Pattern pattern(const Layout& l) const;
  void fill_inputs(const Layout& l, bool sentinel_out);
  size_t check_outputs(const Layout& l);
  double first_op_ms(Impl& impl);
  void sweep(Impl& impl, bool inject_here);
  void run_actorcc();
  void run_nccl(bool symmetric);
  // send_recv's ring: this rank's buffer to the next rank, the previous rank's into `r`.
  std::vector<P2POp> ring_batch(const void* s, void* r, size_t n) const;
#ifdef ACTORCC_WITH_CUDA
  // What this rank sends and receives in send_recv or all_to_all (n: all_to_all's block): the
  // library's own plan of those calls (algorithms/p2p_plan.hpp), which NCCL then runs.
  std::vector<P2POp> transfers(const void* s, void* r, size_t n) const;
#endif
  std::vector<double> gather_max(const std::vector<double>& mine);
  void emit(const std::string& line);

  const Config& c_;
  Status status_;
  std::string where_ = "start";
  bool gpu_ = false;
  void* stream_ = nullptr;
  std::unique_ptr<Communicator> comm_;
#ifdef ACTORCC_WITH_CUDA
  std::unique_ptr<NcclLib> nccl_;  // the NCCL loader is part of the library's CUDA build only
#endif
  bool nccl_version_sent_ = false;
  bool nccl_inputs_ = false;  // the inputs NCCL's check uses (pattern.hpp: exact_in_type)
  std::vector<host::Buffer> host_bufs_;
  std::FILE* results_ = nullptr;
  int64_t arrival_us_ = 0, init_end_us_ = 0;
};

void* Worker::alloc(size_t bytes) {
  if (gpu_) return gpu::malloc_device(bytes);
  host_bufs_.emplace_back(bytes);
  return host_bufs_.back().get();
}

void Worker::release(void* p) {
  if (!p) return;
  if (gpu_) {
    gpu::free_device(p);
    return;
  }
  for (auto it = host_bufs_.begin(); it != host_bufs_.end(); ++it)
    if (it->get() == p) {
      host_bufs_.erase(it);
      return;
    }
}

void Worker::emit(const std::string& line) {
  if (!results_) return;
  std::fputs(line.c_str(), results_);
  std::fflush(results_);
}

std::vector<double> Worker::gather_max(const std::vector<double>& mine) {
  std::ostringstream os;
  os.precision(17);
  for (double v : mine) os << v << " ";
  auto all = comm_->allgather_bytes(os.str());
  std::vector<double> out(mine.size(), -1e300);
  for (auto& blob : all) {
    std::istringstream is(blob);
    for (auto& o : out) {
      double v = 0;
      is >> v;
      o = std::max(o, v);
    }
  }
  return out;
}

Layout Worker::layout(const Impl& impl, size_t want_bytes) const {
  Layout l;
  size_t ts = dtype_size(c_.dtype);
  int world = c_.world;
  l.count = want_bytes / ts;
  bool split = c_.coll == Collective::ReduceScatter || c_.coll == Collective::AllGather || c_.coll == Collective::AllToAll;
  if (split) l.count -= l.count % static_cast<size_t>(world);
  l.bytes = l.count * ts;
  l.chunk = split ? l.count / world : l.count;
  char* a = static_cast<char*>(impl.a);
  char* b = static_cast<char*>(impl.b);
  size_t mine = static_cast<size_t>(c_.rank) * l.chunk * ts;
  switch (c_.coll) {
    case Collective::ReduceScatter:
      l.send = a;
      l.recv = c_.inplace ? a + mine : b;
      l.arg = l.chunk;
      l.in_count = l.count;
      l.out_count = l.chunk;
      break;
    case Collective::AllGather:
      l.recv = c_.inplace ? a : b;
      l.send = c_.inplace ? a + mine : a;
      l.arg = l.chunk;
      l.in_count = l.chunk;
      l.out_count = l.count;
      break;
    case Collective::AllToAll:  // never in place (the library refuses overlapping buffers)
    case Collective::SendRecv:
      l.send = a;
      l.recv = b;
      l.arg = c_.coll == Collective::AllToAll ? l.chunk : l.count;
      l.in_count = l.count;
      l.out_count = l.count;
      break;
    default:  // all_reduce, broadcast
      l.send = a;
      l.recv = c_.inplace ? a : b;
      l.arg = l.count;
      l.in_count = l.count;
      l.out_count = l.count;
      break;
  }
  return l;
}

Pattern Worker::pattern(const Layout& l) const {
  return make_pattern(static_cast<int>(c_.coll), static_cast<int>(c_.op), static_cast<int>(c_.dtype), c_.world,
                      c_.rank, c_.root, l.chunk, nccl_inputs_);
}

// Writes this rank's input; with sentinel_out, first fills the output with a value no correct
// result has (for in-place calls the input then overwrites its part).
void Worker::fill_inputs(const Layout& l, bool sentinel_out) {
  Pattern p = pattern(l);
  if (gpu_) {
    if (sentinel_out) gpu::fill(l.recv, l.out_count, c_.dtype, p, 0, true, stream_);
    gpu::fill(l.send, l.in_count, c_.dtype, p, 0, false, stream_);
    gpu::stream_sync(stream_);
  } else {
    if (sentinel_out) host::fill(l.recv, l.out_count, c_.dtype, p, 0, true);
    host::fill(l.send, l.in_count, c_.dtype, p, 0, false);
  }
}

size_t Worker::check_outputs(const Layout& l) {
  Pattern p = pattern(l);
  return gpu_ ? gpu::check(l.recv, l.out_count, c_.dtype, p, stream_) : host::check(l.recv, l.out_count, c_.dtype, p);
}

// Latency of the first collective on a 4 KB message right after init (host clock, including
// whatever lazy set-up the implementation does on its first call); max over ranks.
double Worker::first_op_ms(Impl& impl) {
  phase(impl.name + ": first 4 KB call");
  Layout l = layout(impl, 4096);
  fill_inputs(l, false);
  comm_->host_barrier();
  double t0 = steady_us();
  impl.call(l.send, l.recv, l.arg);
  sync();
  double ms = (steady_us() - t0) / 1e3;
  return gather_max({ms})[0];
}

// The first sizes of a GPU sweep ran 0.5-1.3 us per call slower than the next ones, in every
// implementation alike (the GPU idles at 345 MHz and its clocks ramp up after set-up), so every
// implementation first runs untimed calls of the first size, in rounds (settle.hpp) bounded by
// count and time; after each round the ranks agree on the elapsed time, so all make the same
// calls, and the phase line shows the progress to the launcher.
void Worker::settle(Impl& impl, const std::vector<size_t>& sizes) {
  if (!gpu_ || sizes.empty()) return;
  Layout l = layout(impl, sizes.front());
  if (l.count == 0) return;
  const std::string what = impl.name + ": settling (";
  phase(what + "up to " + std::to_string(kSettleCalls) + " untimed calls or " + std::to_string(static_cast<int>(kSettleMs)) + " ms)");
  fill_inputs(l, false);
  comm_->host_barrier();
  const double t0 = steady_us();
  int done = 0;
  double elapsed_ms = 0;
  for (int n; (n = settle_next_round(done, elapsed_ms)) > 0;) {
    for (int i = 0; i < n; ++i) impl.call(l.send, l.recv, l.arg);
    sync();
    done += n;
    elapsed_ms = gather_max({(steady_us() - t0) / 1e3})[0];
    phase(what + std::to_string(done) + " of " + std::to_string(kSettleCalls) + " untimed calls, " +
          std::to_string(static_cast<int>(elapsed_ms)) + " ms)");
  }
}

void Worker::sweep(Impl& impl, bool inject_here) {
  auto sizes = sweep_sizes(c_);
  size_t inject_at = 0;
  if (inject_here && c_.inject != Inject::None) {
    inject_at = c_.inject_bytes ? c_.inject_bytes : (sizes.size() > 1 ? sizes[1] : sizes[0]);
  }
  bool injected = false;
  settle(impl, sizes);
  for (size_t want : sizes) {
    Layout l = layout(impl, want);
    if (l.count == 0) continue;
    std::string tag = impl.name + " " + std::string(to_string(c_.coll)) + " " + std::to_string(l.bytes) + " B";
    bool fire = inject_here && !injected && c_.rank == c_.inject_rank && want >= inject_at;
    if (fire && c_.inject == Inject::Fail) {
      phase(tag + ": injected failure");
      std::fprintf(stderr, "actorcc-bench: rank %d: injected failure at %s\n", c_.rank, tag.c_str());
      std::fflush(stderr);
      _exit(kExitFailed);  // like a crash: no clean leave
    }
    if (fire && c_.inject == Inject::Hang) {
      phase(tag + ": injected hang");
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }

    phase(tag + ": warm-up and timing");
    fill_inputs(l, false);
    comm_->host_barrier();
    auto one = [&] { impl.call(l.send, l.recv, l.arg); };
    // A checked call: fresh inputs (in place, the timed calls overwrote them), a poisoned
    // output, every rank past its timed calls (the barrier) before anyone refills.
    gpu::Verify verify;
    if (c_.check)
      verify = [&](const std::function<void()>& launch) -> size_t {
        phase(tag + ": check");
        fill_inputs(l, true);
        comm_->host_barrier();
        launch();
        sync();
        return check_outputs(l);
      };
    const int iters = c_.iters_for(l.bytes);
    gpu::Timing t;
    if (gpu_) {
      t = gpu::time_calls(stream_, c_.warmup, iters, c_.graph, one, verify, !c_.inplace);
    } else {
      auto checked = [&] {
        if (!verify) return;
        t.wrong = std::max(t.wrong, verify(one));
        ++t.checks;
      };
      for (int i = 0; i < c_.warmup; ++i) one();
      double t0 = steady_us();
      for (int i = 0; i < iters; ++i) one();
      t.mean_us = (steady_us() - t0) / iters;
      checked();
      std::vector<double> calls(static_cast<size_t>(iters));
      for (auto& x : calls) {
        double s = steady_us();
        one();
        x = steady_us() - s;
      }
      t.p50_us = host::percentile(calls, 0.50);
      t.p99_us = host::percentile(calls, 0.99);
      checked();
    }

    size_t wrong = t.wrong;
    if (c_.check && fire && c_.inject == Inject::Wrong) {
      Pattern p = pattern(l);
      if (gpu_) {
        gpu::fill(l.recv, l.out_count, c_.dtype, p, 0, true, stream_);
        sync();
      } else {
        host::fill(l.recv, l.out_count, c_.dtype, p, 0, true);
      }
      wrong = check_outputs(l);
    }
    if (fire) injected = true;

    phase(tag + ": gather");
    std::ostringstream os;
    os.precision(17);
    os << t.mean_us << " " << t.p50_us << " " << t.p99_us << " " << wrong;
    auto all = comm_->allgather_bytes(os.str());
    if (c_.rank == 0) {
      Row r;
      r.bytes = l.bytes;
      r.count = l.count;
      if (impl.algo) r.algo = impl.algo(l.count * dtype_size(c_.dtype));
      for (size_t q = 0; q < all.size(); ++q) {
        std::istringstream is(all[q]);
        double mean = 0, p50 = 0, p99 = 0;
        size_t w = 0;
        is >> mean >> p50 >> p99 >> w;
        r.time_us = std::max(r.time_us, mean);
        r.p50_us = std::max(r.p50_us, p50);
        r.p99_us = std::max(r.p99_us, p99);
        r.wrong += w;
        if (w) {
          if (!r.wrong_ranks.empty()) r.wrong_ranks += ',';
          r.wrong_ranks += std::to_string(q) + ":" + std::to_string(w);
        }
      }
      r.algbw = r.time_us > 0 ? static_cast<double>(r.bytes) / r.time_us / 1e3 : 0;
      r.busbw = r.algbw * busbw_factor(c_.coll, c_.world);
      emit(format_row(r));
    }
  }
}

std::vector<P2POp> Worker::ring_batch(const void* s, void* r, size_t n) const {
  const int right = (c_.rank + 1) % c_.world, left = (c_.rank + c_.world - 1) % c_.world;
  return {{P2POp::Kind::Send, const_cast<void*>(s), n, c_.dtype, right}, {P2POp::Kind::Recv, r, n, c_.dtype, left}};
}

#ifdef ACTORCC_WITH_CUDA
std::vector<P2POp> Worker::transfers(const void* s, void* r, size_t n) const {
  if (c_.coll == Collective::SendRecv) return ring_batch(s, r, n);
  CollArgs a{Collective::AllToAll, s, r, n, c_.dtype, RedOp::Sum, 0, stream_};
  return p2p_transfers(a, c_.rank, c_.world);
}
#endif

size_t buffer_bytes(const Config& c) { return std::max<size_t>(std::max(c.max_bytes, c.min_bytes), 4096); }

void Worker::run_actorcc() {
  Impl impl;
  impl.name = "actorcc";
  size_t bytes = buffer_bytes(c_);
  impl.a = alloc(bytes);
  impl.b = alloc(bytes);
  impl.call = [&](const void* s, void* r, size_t n) {
    switch (c_.coll) {
      case Collective::AllReduce: comm_->all_reduce(s, r, n, c_.dtype, c_.op, stream_); break;
      case Collective::ReduceScatter: comm_->reduce_scatter(s, r, n, c_.dtype, c_.op, stream_); break;
      case Collective::AllGather: comm_->all_gather(s, r, n, c_.dtype, stream_); break;
      case Collective::AllToAll: comm_->all_to_all(s, r, n, c_.dtype, stream_); break;
      case Collective::SendRecv: comm_->send_recv(ring_batch(s, r, n), stream_); break;
      default: comm_->broadcast(s, r, n, c_.dtype, c_.root, stream_); break;
    }
  };
  impl.algo = [&](size_t call_bytes) { return comm_->plan(c_.coll, call_bytes, c_.register_buffers); };
  emit(format_impl(impl.name));
  // init: from the last rank's arrival to the last rank's Communicator being ready.
  auto stamps = comm_->allgather_bytes(std::to_string(arrival_us_) + " " + std::to_string(init_end_us_));
  int64_t last_arrival = 0, last_ready = 0;
  for (auto& s : stamps) {
    std::istringstream is(s);
    int64_t a = 0, e = 0;
    is >> a >> e;
    last_arrival = std::max(last_arrival, a);
    last_ready = std::max(last_ready, e);
  }
  double init_ms = static_cast<double>(last_ready - last_arrival) / 1e3;
  double first = first_op_ms(impl);
  // The backend's own set-up steps (the rails' NCCL init and connection), slowest rank each.
  auto steps = comm_->setup_ms();
  std::vector<double> mine;
  for (const auto& st : steps) mine.push_back(st.second);
  const auto worst = gather_max(mine);
  for (size_t k = 0; k < steps.size(); ++k) steps[k].second = worst[k];
  emit(format_startup(init_ms, first, steps));
  if (c_.register_buffers) {
    comm_->register_buffer(impl.a, bytes);
    comm_->register_buffer(impl.b, bytes);
  }
  sweep(impl, true);
  sync();
  comm_->host_barrier();
  if (c_.register_buffers) {
    comm_->deregister_buffer(impl.b);
    comm_->deregister_buffer(impl.a);
  }
  release(impl.b);
  release(impl.a);
}

void Worker::run_nccl(bool symmetric) {
  std::string name = symmetric ? "nccl-symmetric" : "nccl";
#ifndef ACTORCC_WITH_CUDA
  // A build without nvcc has no NCCL loader (and runs the CPU backend): the same on every rank.
  if (c_.rank == 0) std::fprintf(stderr, "actorcc-bench: skipping %s: built without CUDA\n", name.c_str());
  emit(format_skip(name, "actorcc-bench was built without CUDA"));
}
#else
  phase(name + ": loading NCCL");
  std::string err;
  if (!gpu_) {
    err = "NCCL needs GPUs (this run uses the CPU backend)";
  } else if (!nccl_) {
    try {
      nccl_ = NcclLib::load(c_.nccl_lib.empty() ? "libnccl.so.2" : c_.nccl_lib);
    } catch (const std::exception& e) {
      err = e.what();
    }
  }
  // Every rank must agree to run it or to skip it.
  auto errs = comm_->allgather_bytes(err);
  std::string why;
  for (size_t q = 0; q < errs.size() && why.empty(); ++q)
    if (!errs[q].empty()) why = "rank " + std::to_string(q) + ": " + errs[q];
  if (!why.empty()) {
    if (c_.rank == 0) std::fprintf(stderr, "actorcc-bench: skipping %s: %s\n", name.c_str(), why.c_str());
    emit(format_skip(name, why));
    return;
  }
  if (!nccl_version_sent_) {
    emit("nccl\t" + nccl_->version() + "\t" + nccl_->path() + "\n");
    nccl_version_sent_ = true;
  }
  emit(format_impl(name));

  phase(name + ": ncclCommInitRank");
  std::string id = c_.rank == 0 ? nccl_->unique_id() : std::string();
  auto ids = comm_->allgather_bytes(id);
  comm_->host_barrier();
  int64_t start = wall_us();
  std::unique_ptr<NcclComm> nc = nccl_->init_rank(c_.world, ids[0], c_.rank);
  int64_t end = wall_us();
  auto stamps = gather_max({static_cast<double>(start), static_cast<double>(end)});
  double init_ms = (stamps[1] - stamps[0]) / 1e3;

  Impl impl;
  impl.name = name;
  size_t bytes = buffer_bytes(c_);
  void* wins[2] = {nullptr, nullptr};
  if (symmetric) {
    phase(name + ": ncclMemAlloc + ncclCommWindowRegister");
    impl.a = nccl_->mem_alloc(bytes);
    impl.b = nccl_->mem_alloc(bytes);
    wins[0] = nc->window_register(impl.a, bytes);
    wins[1] = nc->window_register(impl.b, bytes);
  } else {
    impl.a = alloc(bytes);
    impl.b = alloc(bytes);
  }
  NcclComm* ncp = nc.get();
  impl.call = [&, ncp](const void* s, void* r, size_t n) {
    if (c_.coll == Collective::SendRecv || c_.coll == Collective::AllToAll) {
      std::vector<NcclComm::Transfer> xs;
      for (const P2POp& op : transfers(s, r, n))
        xs.push_back({op.kind == P2POp::Kind::Send, op.buf, op.count, op.dtype, op.peer});
      ncp->transfers(xs, stream_);
      return;
    }
    ncp->run(c_.coll, s, r, n, c_.dtype, c_.op, c_.root, stream_);
  };
  nccl_inputs_ = true;
  double first = first_op_ms(impl);
  // NCCL's one-time cost per process (loading it, its topology discovery) falls on the first
  // communicator a process makes: where actorcc's rails made one before, this init is not it.
  const bool after_rails = !comm_->setup_ms().empty();
  emit(format_startup(init_ms, first, {},
                      after_rails ? "init after actorcc's rails in the same processes: NCCL's one-time per-process "
                                    "cost (library load, topology) was paid there (actorcc's nccl_init)"
                                  : ""));
  sweep(impl, false);
  nccl_inputs_ = false;
  sync();
  comm_->host_barrier();
  if (symmetric) {
    nc->window_deregister(wins[1]);
    nc->window_deregister(wins[0]);
  }
  nc.reset();  // ncclCommDestroy
  if (symmetric) {
    nccl_->mem_free(impl.b);
    nccl_->mem_free(impl.a);
  } else {
    release(impl.b);
    release(impl.a);
  }
}
#endif

void Worker::run() {
  gpu_ = c_.backend == "cuda";
  phase("starting");
  if (gpu_) {
    setenv("NCCL_NVLS_ENABLE", "0", 1);  // never NVLS (multicast objects are forbidden here)
    gpu::set_device(c_.device);
    stream_ = gpu::stream_create();
  }
  // The launcher passes the id in the environment (it is a join token: not on the command
  // line); --id HEX serves manual runs.
  std::string hex = c_.id_hex;
  if (hex.empty())
    if (const char* e = std::getenv(kIdEnv)) hex = e;
  if (hex.empty()) throw std::runtime_error(std::string(kIdEnv) + " is not set (workers are started by the launcher)");
  UniqueId id = UniqueId::parse(hex);

  Options o;
  o.backend = gpu_ ? Backend::Cuda : Backend::Cpu;
  o.device = gpu_ ? c_.device : -1;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(c_.timeout_s * 1000));
  o.join_timeout = std::chrono::milliseconds(
      static_cast<int64_t>((c_.timeout_s + c_.stagger_s * c_.world + 60) * 1000));
  o.algo = c_.algo;
  o = options_from_env(o);

  // Arrival: this process is up (and its CUDA context exists) and joins the group now.
  arrival_us_ = wall_us();
  phase("joining the actorcc group");
  comm_ = std::make_unique<Communicator>(id, c_.rank, c_.world, o);
  init_end_us_ = wall_us();

  if (c_.rank == 0) {
    std::string path = c_.run_dir + "/results.tsv";
    results_ = std::fopen(path.c_str(), "a");
    if (!results_) throw std::runtime_error("cannot write " + path);
  }
  if (c_.rank == 0) {
    // Who is where, as the topology layer saw it (shows the masking of each launch mode).
    for (const auto& p : comm_->peers()) {
      std::ostringstream os;
      os << "peer\t" << p.rank << "\t" << p.hostname << "\t" << p.pid << "\t" << p.node << "\t" << p.local_rank
         << "\t" << (p.gpu_uuid.empty() ? "-" : p.gpu_uuid) << "\t" << (p.pci_bus_id.empty() ? "-" : p.pci_bus_id)
         << "\t" << p.visible_devices << "\t" << comm_->device() << "\n";
      emit(os.str());
    }
  }
  for (auto& name : c_.impls) {
    if (name == "actorcc") run_actorcc();
    else if (name == "nccl") run_nccl(false);
  }
  if (c_.nccl_symmetric) run_nccl(true);
  phase("finishing");
  comm_->host_barrier();
  emit("done\n");
  if (results_) std::fclose(results_);
  results_ = nullptr;
  phase("done");
}

}  // namespace

int worker_main(const Config& c) {
  Worker w(c);
  try {
    w.run();
    return kExitOk;
  } catch (const RemoteError& e) {
    std::fprintf(stderr, "actorcc-bench: rank %d (during %s): %s\n", c.rank, w.where().c_str(), e.what());
    return kExitRemote;
  } catch (const TimeoutError& e) {
    std::fprintf(stderr, "actorcc-bench: rank %d (during %s): %s\n", c.rank, w.where().c_str(), e.what());
    return kExitTimeout;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "actorcc-bench: rank %d failed during %s: %s\n", c.rank, w.where().c_str(), e.what());
    w.abort("rank " + std::to_string(c.rank) + " failed during " + w.where() + ": " + e.what());
    return kExitFailed;
  }
}

}  // namespace actorcc::bench
