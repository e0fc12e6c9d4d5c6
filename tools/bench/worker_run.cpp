// One rank of a benchmark run, its entry (worker_main, started by the launcher with --worker): it
// joins the actorcc group with the launcher's UniqueId, then runs the sweep (worker.cpp) for each
// implementation in turn: actorcc through the public Communicator API, and NCCL (dlopen) with its
// unique id shared over Communicator::allgather_bytes.
#include <algorithm>

#include "worker_state.hpp"

namespace actorcc::bench {
namespace worker_detail {
namespace {

size_t buffer_bytes(const Config& c) { return std::max<size_t>(std::max(c.max_bytes, c.min_bytes), 4096); }

}  // namespace

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


}  // namespace worker_detail

int worker_main(const Config& c) {
  worker_detail::Worker w(c);
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
