// Flag parsing for actorcc-bench (see cli.hpp).
#include "cli.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "actorcc/error.hpp"

namespace actorcc::bench {
namespace {

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

long long to_int(const std::string& flag, const std::string& v) {
  try {
    size_t pos = 0;
    long long x = std::stoll(v, &pos, 0);
    if (pos != v.size()) throw 0;
    return x;
  } catch (...) {
    throw InvalidArgument("flag " + flag + ": '" + v + "' is not an integer");
  }
}

double to_double(const std::string& flag, const std::string& v) {
  try {
    size_t pos = 0;
    double x = std::stod(v, &pos);
    if (pos != v.size() || !std::isfinite(x)) throw 0;
    return x;
  } catch (...) {
    throw InvalidArgument("flag " + flag + ": '" + v + "' is not a number");
  }
}

bool to_bool01(const std::string& flag, const std::string& v) {
  std::string s = lower(v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  throw InvalidArgument("flag " + flag + ": expected 0 or 1, got '" + v + "'");
}

DataType parse_dtype_nccl(const std::string& s) {
  std::string l = lower(s);
  if (l == "bf16" || l == "bfloat16") return DataType::BFloat16;
  return parse_dtype(l);  // float, half, double, int8, uint8, int32, int64 and aliases
}

Inject parse_inject(const std::string& flag) {
  if (flag == "--inject-fail") return Inject::Fail;
  if (flag == "--inject-hang") return Inject::Hang;
  return Inject::Wrong;
}

}  // namespace

size_t parse_size(const std::string& text) {
  std::string s = lower(text);
  if (!s.empty() && s.back() == 'b') s.pop_back();
  if (s.empty()) throw InvalidArgument("bad size '" + text + "'");
  size_t mult = 1;
  switch (s.back()) {
    case 'k': mult = size_t(1) << 10; break;
    case 'm': mult = size_t(1) << 20; break;
    case 'g': mult = size_t(1) << 30; break;
    case 't': mult = size_t(1) << 40; break;
    default: break;
  }
  if (mult != 1) s.pop_back();
  if (s.empty()) throw InvalidArgument("bad size '" + text + "'");
  for (char ch : s)
    if (!std::isdigit(static_cast<unsigned char>(ch)) && ch != '.')
      throw InvalidArgument("bad size '" + text + "' (use bytes or a K/M/G suffix, e.g. 64K)");
  double v = std::stod(s);
  return static_cast<size_t>(std::llround(v * static_cast<double>(mult)));
}

std::string format_size(size_t b) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (u < 4 && b >= 1024 && b % 1024 == 0) {
    b /= 1024;
    ++u;
  }
  return std::to_string(b) + units[u];
}

const char* nccl_tests_type_name(DataType t) {
  switch (t) {
    case DataType::Float32: return "float";
    case DataType::Float16: return "half";
    case DataType::BFloat16: return "bfloat16";
    case DataType::Float64: return "double";
    case DataType::Int8: return "int8";
    case DataType::UInt8: return "uint8";
    case DataType::Int32: return "int32";
    case DataType::Int64: return "int64";
  }
  return "invalid";
}

const char* launch_name(Launch l) { return l == Launch::Actors ? "actors" : "torchrun"; }
const char* order_name(Order o) { return o == Order::Sequential ? "sequential" : "random"; }

std::string usage() {
  return R"(usage: actorcc-bench [flags]

Benchmarks actorcc collectives (and NCCL as a baseline, in the same run) with one worker
process per GPU, started the way Ray actors or torchrun start them. Without GPUs it runs the
CPU backend with --ranks processes.

nccl-tests flags:
  -b, --minbytes SIZE     smallest message (default 1K; K/M/G suffixes)
  -e, --maxbytes SIZE     largest message (default 64M on GPUs, 1M on the CPU backend)
  -f, --stepfactor F      multiply the size by F each step (default 4)
  -i, --stepbytes SIZE    add SIZE each step (used when -f 1)
  -n, --iters N           timed calls per size (default 0 = 200 up to 16 MB, 20 above)
  -w, --warmup_iters N    warm-up calls per size (default 5; on GPUs every implementation
                          first makes up to 2000 untimed calls of the smallest size, for at
                          most about 1 s)
  -c, --check 0|1         check every result exactly (default 1)
  -d, --datatype T        float|half|bfloat16|double|int8|uint8|int32|int64 (default float)
  -o, --op OP             sum|prod|min|max|avg (default sum)
  -r, --root R            broadcast root (default 0)
  -G, --cudagraph N       capture the -n calls in one CUDA graph and launch it N times (0: eager)
  -J, --output_file F     write JSON results to F (and a PNG plot next to it)
  -g, --gpus N            number of GPUs / worker processes (default: all found)
      --coll C            all_reduce|reduce_scatter|all_gather|broadcast|send_recv|all_to_all
                          (default all_reduce; send_recv: a ring, each rank sends its buffer to
                          the next and receives the previous one's, in one batch)
      --inplace           in-place calls (default out-of-place)

launcher:
      --launch actors|torchrun  actors (default): each worker sees only its GPU and they start
                          --stagger seconds apart; torchrun: all see all GPUs, start together
      --stagger S         seconds between worker starts in actors mode (default 1)
      --order sequential|random  start order of the ranks (default sequential)
      --seed N            seed for --order random
      --permute           map rank r to GPU (n-1-r)
      --nodes K           split the workers into K virtual nodes (ACTORCC_NODE_ID/NCCL_HOSTID)
      --ranks N           world size for the CPU backend (default 4)
      --backend auto|cpu|cuda   (default auto: cuda where GPUs are found)
      --timeout S         bound on any wait (default 300); a run that makes no progress for
                          S+5 seconds is killed, naming the rank that is behind
      --addr HOST         address of the group's bootstrap root, hosted by the launcher
                          (default 127.0.0.1: all workers run here; auto = library default)

implementations:
      --impl LIST         comma list of actorcc,nccl (default: both on GPUs, actorcc on CPU)
      --nccl-symmetric    also run NCCL with window-registered symmetric buffers
      --nccl-lib PATH     libnccl.so to dlopen (else $ACTORCC_NCCL_LIB, else PyTorch's NCCL
                          from the nvidia.nccl package, else libnccl.so.2)
      --algo NAME         actorcc algorithm override (Options.algo)
      --register 0|1      register the bench buffers with actorcc (default 1)

output:
      --plot PATH         plot script (default: bench/plot.py of the source tree)
      --no-plot           do not write the PNG
  -h, --help
)";
}

Config parse_args(const std::vector<std::string>& args, bool* help) {
  Config c;
  *help = false;
  bool max_set = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::string val;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0) {
      auto eq = a.find('=');
      if (eq != std::string::npos) {
        val = a.substr(eq + 1);
        a = a.substr(0, eq);
        has_inline = true;
      }
    }
    auto next = [&]() -> std::string {
      if (has_inline) return val;
      if (i + 1 >= args.size()) throw InvalidArgument("flag " + a + " needs a value");
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      *help = true;
    } else if (a == "-b" || a == "--minbytes") {
      c.min_bytes = parse_size(next());
    } else if (a == "-e" || a == "--maxbytes") {
      c.max_bytes = parse_size(next());
      max_set = true;
    } else if (a == "-f" || a == "--stepfactor") {
      c.step_factor = to_double(a, next());
    } else if (a == "-i" || a == "--stepbytes") {
      c.step_bytes = parse_size(next());
    } else if (a == "-n" || a == "--iters") {
      c.iters = static_cast<int>(to_int(a, next()));
    } else if (a == "-w" || a == "--warmup_iters") {
      c.warmup = static_cast<int>(to_int(a, next()));
    } else if (a == "-c" || a == "--check") {
      c.check = to_bool01(a, next());
    } else if (a == "-d" || a == "--datatype") {
      c.dtype = parse_dtype_nccl(next());
    } else if (a == "-o" || a == "--op") {
      c.op = parse_redop(lower(next()));
    } else if (a == "-r" || a == "--root") {
      c.root = static_cast<int>(to_int(a, next()));
    } else if (a == "-G" || a == "--cudagraph") {
      c.graph = static_cast<int>(to_int(a, next()));
    } else if (a == "-J" || a == "--output_file") {
      c.json_path = next();
    } else if (a == "-g" || a == "--gpus") {
      c.gpus = static_cast<int>(to_int(a, next()));
    } else if (a == "-t" || a == "--nthreads") {
      if (to_int(a, next()) != 1) throw InvalidArgument("-t: only one thread per process is supported");
    } else if (a == "--coll") {
      c.coll = parse_collective(lower(next()));
      if (c.coll == Collective::Barrier) throw InvalidArgument("--coll barrier is not benchmarked");
      if (c.coll > Collective::Barrier && c.coll != Collective::SendRecv && c.coll != Collective::AllToAll)
        throw InvalidArgument("--coll " + std::string(to_string(c.coll)) + " is not benchmarked yet");
    } else if (a == "--inplace") {
      c.inplace = true;
    } else if (a == "--launch") {
      std::string v = lower(next());
      if (v == "actors" || v == "actor" || v == "ray") c.launch = Launch::Actors;
      else if (v == "torchrun") c.launch = Launch::Torchrun;
      else throw InvalidArgument("--launch: expected actors or torchrun, got '" + v + "'");
    } else if (a == "--stagger") {
      c.stagger_s = to_double(a, next());
      c.stagger_set = true;
      if (c.stagger_s < 0) throw InvalidArgument("--stagger must be >= 0");
    } else if (a == "--order") {
      std::string v = lower(next());
      if (v == "sequential") c.order = Order::Sequential;
      else if (v == "random") c.order = Order::Random;
      else throw InvalidArgument("--order: expected sequential or random, got '" + v + "'");
    } else if (a == "--seed") {
      c.seed = static_cast<uint64_t>(to_int(a, next()));
    } else if (a == "--permute") {
      c.permute = true;
    } else if (a == "--nodes") {
      c.nodes = static_cast<int>(to_int(a, next()));
    } else if (a == "--ranks") {
      c.ranks = static_cast<int>(to_int(a, next()));
    } else if (a == "--backend") {
      c.backend = lower(next());
      if (c.backend == "gpu") c.backend = "cuda";
      if (c.backend != "auto" && c.backend != "cpu" && c.backend != "cuda")
        throw InvalidArgument("--backend: expected auto, cpu or cuda");
    } else if (a == "--impl") {
      c.impls.clear();
      for (auto& s : split(lower(next()), ',')) {
        if (s != "actorcc" && s != "nccl" && s != "nccl-symmetric")
          throw InvalidArgument("--impl: unknown implementation '" + s + "' (known: actorcc, nccl)");
        if (s == "nccl-symmetric") c.nccl_symmetric = true;
        else c.impls.push_back(s);
      }
      c.impls_explicit = true;
    } else if (a == "--nccl-symmetric") {
      c.nccl_symmetric = true;
    } else if (a == "--nccl-lib") {
      c.nccl_lib = next();
    } else if (a == "--timeout") {
      c.timeout_s = to_double(a, next());
      if (c.timeout_s <= 0) throw InvalidArgument("--timeout must be > 0");
    } else if (a == "--addr") {
      c.addr = next();
      if (c.addr == "auto") c.addr.clear();
    } else if (a == "--algo") {
      c.algo = next();
    } else if (a == "--register") {
      c.register_buffers = to_bool01(a, next());
    } else if (a == "--plot") {
      c.plot_script = next();
    } else if (a == "--no-plot") {
      c.plot = false;
    } else if (a == "--worker") {
      c.worker = true;
    } else if (a == "--rank") {
      c.rank = static_cast<int>(to_int(a, next()));
    } else if (a == "--world") {
      c.world = static_cast<int>(to_int(a, next()));
    } else if (a == "--device") {
      c.device = static_cast<int>(to_int(a, next()));
    } else if (a == "--id") {
      c.id_hex = next();
    } else if (a == "--run-dir") {
      c.run_dir = next();
    } else if (a == "--inject-fail" || a == "--inject-hang" || a == "--inject-wrong") {
      // RANK or RANK@SIZE
      c.inject = parse_inject(a);
      std::string v = next();
      auto at = v.find('@');
      c.inject_rank = static_cast<int>(to_int(a, v.substr(0, at)));
      if (at != std::string::npos) c.inject_bytes = parse_size(v.substr(at + 1));
    } else if (a == "--keep-run-dir") {
      c.keep_run_dir = true;
    } else {
      throw InvalidArgument("unknown flag '" + args[i] + "' (see --help)");
    }
  }
  if (c.iters < 0) throw InvalidArgument("-n must be >= 0 (0: by size)");
  if (c.warmup < 0) throw InvalidArgument("-w must be >= 0");
  if (c.graph < 0) throw InvalidArgument("-G must be >= 0");
  if (c.nodes < 1) throw InvalidArgument("--nodes must be >= 1");
  if (c.min_bytes == 0) c.min_bytes = 1;
  if (max_set && c.max_bytes < c.min_bytes) throw InvalidArgument("-e must be >= -b");
  if (c.step_factor <= 1 && c.step_bytes == 0 && c.max_bytes != c.min_bytes && max_set)
    throw InvalidArgument("-f must be > 1 (or give -i)");
  return c;
}

std::vector<size_t> sweep_sizes(const Config& c) {
  std::vector<size_t> out;
  size_t maxb = c.max_bytes ? c.max_bytes : c.min_bytes;
  for (size_t b = c.min_bytes; b <= maxb;) {
    out.push_back(b);
    size_t nb;
    if (c.step_factor > 1) nb = static_cast<size_t>(std::ceil(static_cast<double>(b) * c.step_factor));
    else if (c.step_bytes > 0) nb = b + c.step_bytes;
    else break;
    if (nb <= b) break;
    b = nb;
  }
  return out;
}

std::vector<std::string> to_worker_args(const Config& c, int rank, int world, int device) {
  auto num = [](double x) {
    std::ostringstream os;
    os.precision(17);
    os << x;
    return os.str();
  };
  std::vector<std::string> a = {
      "--worker", "--rank", std::to_string(rank), "--world", std::to_string(world),
      "--device", std::to_string(device), "--run-dir", c.run_dir,
      "-b", std::to_string(c.min_bytes), "-e", std::to_string(c.max_bytes),
      "-f", num(c.step_factor), "-i", std::to_string(c.step_bytes),
      "-n", std::to_string(c.iters), "-w", std::to_string(c.warmup), "-c", c.check ? "1" : "0",
      "-d", nccl_tests_type_name(c.dtype), "-o", std::string(to_string(c.op)),
      "-r", std::to_string(c.root), "-G", std::to_string(c.graph),
      "--coll", std::string(to_string(c.coll)), "--launch", launch_name(c.launch),
      "--stagger", num(c.stagger_s), "--nodes", std::to_string(c.nodes),
      "--backend", c.backend, "--timeout", num(c.timeout_s),
      "--register", c.register_buffers ? "1" : "0",
  };
  std::string impls;
  for (auto& s : c.impls) impls += (impls.empty() ? "" : ",") + s;
  if (c.nccl_symmetric) impls += (impls.empty() ? "" : ",") + std::string("nccl-symmetric");
  a.push_back("--impl");
  a.push_back(impls);
  if (c.inplace) a.push_back("--inplace");
  if (c.permute) a.push_back("--permute");
  if (!c.nccl_lib.empty()) a.insert(a.end(), {"--nccl-lib", c.nccl_lib});
  if (!c.algo.empty()) a.insert(a.end(), {"--algo", c.algo});
  if (c.inject != Inject::None) {
    const char* f = c.inject == Inject::Fail ? "--inject-fail" : c.inject == Inject::Hang ? "--inject-hang" : "--inject-wrong";
    a.insert(a.end(), {f, std::to_string(c.inject_rank) + "@" + std::to_string(c.inject_bytes)});
  }
  return a;
}

}  // namespace actorcc::bench
