// The state of one benchmark rank (worker.cpp: the sweep and its checks; worker_run.cpp: the
// implementations run in turn and the process entry): the progress file the launcher reads, one
// implementation under test, the layout of one call, and the Worker that runs them.
#pragma once
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

namespace actorcc::bench::worker_detail {
using nccl::NcclComm;
using nccl::NcclLib;

inline int64_t wall_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}
inline double steady_us() {
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

}  // namespace actorcc::bench::worker_detail
