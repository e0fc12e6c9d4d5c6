// Command line of actorcc-bench: nccl-tests compatible flags (-b -e -f -i -n -w -c -d -o -r -G -J)
// plus launcher and baseline flags. One Config describes a run; the launcher resolves defaults
// (backend, world size, size range, implementations) and hands the resolved Config to its
// workers as flags (to_worker_args), so launcher and workers never disagree.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "actorcc/types.hpp"

namespace actorcc::bench {

enum class Launch { Actors, Torchrun };
enum class Order { Sequential, Random };

// Failure injection for tests of the launcher's error paths (hidden flags).
enum class Inject { None, Fail, Hang, Wrong };

struct Config {
  // nccl-tests flags
  size_t min_bytes = 1024;
  size_t max_bytes = 0;         // 0 = backend default (64M on GPUs, 1M on the CPU backend)
  double step_factor = 4;       // -f
  size_t step_bytes = 0;        // -i (used when step_factor <= 1)
  int iters = 0;                // -n; 0 = by size (iters_for)
  int warmup = 5;               // -w
  bool check = true;            // -c
  DataType dtype = DataType::Float32;  // -d
  RedOp op = RedOp::Sum;        // -o
  int root = 0;                 // -r (broadcast)
  int graph = 0;                // -G: >0 = capture -n calls into one CUDA graph, launch it G times
  std::string json_path;        // -J
  Collective coll = Collective::AllReduce;  // --coll
  bool inplace = false;         // --inplace

  // launcher
  Launch launch = Launch::Actors;
  Order order = Order::Sequential;
  double stagger_s = 1.0;
  bool stagger_set = false;
  uint64_t seed = 0;            // --seed for --order random (0 = from the clock)
  bool permute = false;
  int gpus = 0;                 // --gpus / -g: 0 = all found
  int ranks = 0;                // --ranks: CPU backend world (default 4)
  int nodes = 1;
  std::string backend = "auto"; // auto | cpu | cuda
  std::vector<std::string> impls;  // empty = default (actorcc,nccl where GPUs exist)
  bool impls_explicit = false;
  bool nccl_symmetric = false;
  std::string nccl_lib;         // --nccl-lib (resolved by the launcher)
  double timeout_s = 300;       // --timeout
  // --addr: where the bootstrap root (in the launcher) listens. Every worker runs on this host,
  // so loopback by default ("" = the library's choice: $ACTORCC_SOCKET_ADDR or the first
  // non-loopback IPv4).
  std::string addr = "127.0.0.1";
  std::string algo;             // --algo (Options.algo)
  bool register_buffers = true; // --register 0|1 (actorcc register_buffer on the bench buffers)
  std::string plot_script;      // --plot PATH (default: the repo's bench/plot.py)
  bool plot = true;             // --no-plot

  // hidden: worker side and tests
  bool worker = false;
  int rank = -1;
  int world = 0;
  int device = -1;              // CUDA ordinal inside the worker (-1 = CPU backend)
  std::string run_dir;
  std::string id_hex;           // --id: the group's UniqueId (default: $ACTORCC_BENCH_UNIQUE_ID)
  Inject inject = Inject::None;
  int inject_rank = -1;
  size_t inject_bytes = 0;      // the size at which the injection fires (0 = the second size)
  bool keep_run_dir = false;

  // Timed calls at one size: -n when given, else 200 up to 16 MiB and 20 above (the counts the
  // NCCL baselines in BASELINES.md were measured with: with 20 calls of a few us, the pipeline
  // fill of the first call and the ranks' start skew add ~1 us per call).
  int iters_for(size_t bytes) const { return iters > 0 ? iters : bytes <= (size_t(16) << 20) ? 200 : 20; }
};

// Parses argv (argv[0] excluded). Throws actorcc::InvalidArgument with a usage hint on errors.
// Sets *help when -h/--help was given.
Config parse_args(const std::vector<std::string>& args, bool* help);
std::string usage();

// "1K" -> 1024, "64M", "1G", "4096", "1KB"; throws InvalidArgument.
size_t parse_size(const std::string& text);
std::string format_size(size_t bytes);  // 1024 -> "1K"

// The flags a worker gets (resolved config + hidden flags for rank/world/device/run dir).
std::vector<std::string> to_worker_args(const Config& c, int rank, int world, int device);

// The message sizes of the sweep, in bytes, before rounding to the element/rank granularity.
std::vector<size_t> sweep_sizes(const Config& c);

// nccl-tests' type names (float, half, bfloat16, double, int8, uint8, int32, int64).
const char* nccl_tests_type_name(DataType t);
const char* launch_name(Launch l);
const char* order_name(Order o);

}  // namespace actorcc::bench
