// One rank of a benchmark run (started by the launcher with --worker): the per-size sweep of one
// implementation, its inputs and checks, and the agreement across ranks (worker_state.hpp holds
// the Worker; worker_run.cpp joins the group and runs actorcc, then NCCL). Every per-size figure
// is taken as the max over ranks; rank 0 writes the rows to <run-dir>/results.tsv for the launcher.
#include "worker_state.hpp"

namespace actorcc::bench::worker_detail {

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

// Inputs whose sums are exact in the element type for NCCL, and for actorcc across nodes, whose
// rail steps are NCCL's: there a half-precision sum rounds at each level (the node's shard, then
// the rail's sum in the element type), so inputs exact only in fp32 would differ from the
// reference's one rounding without anything being wrong.
Pattern Worker::pattern(const Layout& l) const {
  return make_pattern(static_cast<int>(c_.coll), static_cast<int>(c_.op), static_cast<int>(c_.dtype), c_.world,
                      c_.rank, c_.root, l.chunk, nccl_inputs_ || comm_->num_nodes() > 1);
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

}  // namespace actorcc::bench::worker_detail
