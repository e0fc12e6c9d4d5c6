// The launcher's configuration: the backend and world from the GPUs it sees, the start order,
// each rank's GPU and environment (actors: one GPU visible each; torchrun: all visible and
// RANK/LOCAL_RANK set; virtual nodes), and the header that tells the user what will run.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "actorcc/actorcc.hpp"
#include "sysinfo.hpp"

#include "launcher.hpp"

namespace actorcc::bench {

void Launcher::resolve() {
  if (c_.backend != "cpu") probe_ = gpu::probe();
  int ngpu = static_cast<int>(probe_.devices.size());
  if (c_.backend == "auto") backend_ = ngpu > 0 ? "cuda" : "cpu";
  else backend_ = c_.backend;
  if (backend_ == "cuda" && ngpu == 0)
    throw InvalidArgument("--backend cuda: no usable GPU (" + (probe_.error.empty() ? "none found" : probe_.error) + ")");
  c_.backend = backend_;
  if (backend_ == "cuda") {
    world_ = c_.gpus ? c_.gpus : (c_.ranks ? c_.ranks : ngpu);
    // ACTORCC_CUDA_SHARE_GPU=1 (the library's setting, inherited by the workers): more ranks
    // than GPUs, assigned round-robin, so the 3-8 rank kernel paths run where one GPU is lent.
    const char* share = std::getenv("ACTORCC_CUDA_SHARE_GPU");
    sharing_ = share && std::string(share) == "1" && world_ > ngpu;
    if (world_ > ngpu && !sharing_)
      throw InvalidArgument("asked for " + std::to_string(world_) + " GPUs but " + std::to_string(ngpu) +
                            " are visible (ACTORCC_CUDA_SHARE_GPU=1 lets ranks share them)");
  } else {
    world_ = c_.ranks ? c_.ranks : (c_.gpus ? c_.gpus : 4);
    if (c_.graph > 0) throw InvalidArgument("-G (CUDA graphs) needs the CUDA backend");
  }
  if (world_ < 1) throw InvalidArgument("need at least one rank");
  if (c_.nodes > world_) throw InvalidArgument("--nodes exceeds the number of ranks");
  if (c_.root < 0 || c_.root >= world_) throw InvalidArgument("-r: root out of range");
  // NCCL refuses two ranks of one host on one GPU; virtual nodes (--nodes, distinct
  // NCCL_HOSTID) are separate hosts to it, so ranks of different nodes may share one.
  const int per_node = (world_ + c_.nodes - 1) / c_.nodes;
  const bool nccl_sharing = sharing_ && per_node > ngpu;
  if (c_.max_bytes == 0) c_.max_bytes = std::max(c_.min_bytes, backend_ == "cuda" ? size_t(64) << 20 : size_t(1) << 20);
  if (c_.impls.empty() && !c_.impls_explicit) {
    c_.impls = {"actorcc"};
    if (backend_ == "cuda" && !nccl_sharing) c_.impls.push_back("nccl");
  }
  bool wants_nccl = c_.nccl_symmetric || std::find(c_.impls.begin(), c_.impls.end(), "nccl") != c_.impls.end();
  if (wants_nccl && backend_ != "cuda") throw InvalidArgument("the NCCL baseline needs GPUs (this run uses the CPU backend)");
  if (wants_nccl && nccl_sharing)
    throw InvalidArgument("the NCCL baseline needs one GPU per rank of a node (NCCL refuses two ranks of one host "
                          "sharing a GPU; ranks of different --nodes may share one)");
  if (wants_nccl) c_.nccl_lib = resolve_nccl_lib(c_);
  if (c_.launch == Launch::Torchrun) c_.stagger_s = 0;

  order_.resize(world_);
  for (int r = 0; r < world_; ++r) order_[r] = r;
  if (c_.order == Order::Random) {
    if (c_.seed == 0) c_.seed = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) | 1;
    std::mt19937_64 rng(c_.seed);
    std::shuffle(order_.begin(), order_.end(), rng);
  }

  // Rank -> GPU and per-worker environment.
  std::vector<std::string> parent_visible;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) parent_visible = split(v, ',');
  workers_.resize(world_);
  for (int r = 0; r < world_; ++r) {
    WorkerProc& w = workers_[r];
    w.rank = r;
    int node = std::min(r / per_node, c_.nodes - 1);
    int local = r - node * per_node;
    if (backend_ == "cuda") {
      w.gpu = (c_.permute ? world_ - 1 - r : r) % ngpu;
      std::string ident = w.gpu < static_cast<int>(parent_visible.size()) ? parent_visible[w.gpu] : std::to_string(w.gpu);
      if (c_.launch == Launch::Actors) {
        w.device = 0;
        w.env.push_back("CUDA_VISIBLE_DEVICES=" + ident);
      } else {
        w.device = w.gpu;
      }
    }
    if (c_.launch == Launch::Torchrun) {
      w.env.push_back("RANK=" + std::to_string(r));
      w.env.push_back("WORLD_SIZE=" + std::to_string(world_));
      w.env.push_back("LOCAL_RANK=" + std::to_string(local));
      w.env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(std::min(per_node, world_ - node * per_node)));
    }
    if (c_.nodes > 1) {
      w.env.push_back("ACTORCC_NODE_ID=node" + std::to_string(node));
      w.env.push_back("NCCL_HOSTID=node" + std::to_string(node));
    }
    w.env.push_back("NCCL_NVLS_ENABLE=0");
    // actorcc's own NCCL transport (groups across nodes, GPUs without P2P) loads the library the
    // baseline runs, unless the user chose one: a comparison of one NCCL with itself, not of two
    // NCCL builds (the system's and PyTorch's differ on the device machine).
    const char* chosen = std::getenv("ACTORCC_NCCL_LIB");
    if (wants_nccl && !(chosen && *chosen)) w.env.push_back("ACTORCC_NCCL_LIB=" + c_.nccl_lib);
  }
}

void Launcher::print_header() {
  std::printf("# actorcc-bench %s: %s %s %s, %d ranks on the %s backend", actorcc::version(),
              std::string(to_string(c_.coll)).c_str(), nccl_tests_type_name(c_.dtype),
              std::string(to_string(c_.op)).c_str(), world_, backend_.c_str());
  if (c_.nodes > 1) std::printf(" in %d virtual nodes", c_.nodes);
  std::printf("\n# launch %s", launch_name(c_.launch));
  const char* sees = backend_ != "cuda"                ? ""
                     : c_.launch == Launch::Actors ? "each worker sees one GPU; "
                                                   : "every worker sees all GPUs; ";
  if (c_.launch == Launch::Actors)
    std::printf(" (%sstarted %.3g s apart, %s order)", sees, c_.stagger_s, order_name(c_.order));
  else
    std::printf(" (%sstarted together)", sees);
  if (c_.permute) std::printf(", permuted");
  const std::string n = c_.iters > 0 ? std::to_string(c_.iters) : "200 up to 16M, 20 above";
  std::printf("\n# sizes %s..%s, -f %g, -n %s, -w %d, -c %d, -G %d, %s\n", format_size(c_.min_bytes).c_str(),
              format_size(c_.max_bytes).c_str(), c_.step_factor, n.c_str(), c_.warmup, c_.check ? 1 : 0, c_.graph,
              c_.inplace ? "in-place" : "out-of-place");
  std::string impls;
  for (auto& s : c_.impls) impls += (impls.empty() ? "" : ",") + s;
  if (c_.nccl_symmetric) impls += (impls.empty() ? "" : ",") + std::string("nccl-symmetric");
  std::printf("# implementations: %s", impls.c_str());
  if (!c_.nccl_lib.empty()) std::printf(" (NCCL from %s)", c_.nccl_lib.c_str());
  std::printf("\n");
  if (backend_ == "cuda") {
    std::printf("# rank -> GPU:");
    for (auto& w : workers_) std::printf(" %d:%d", w.rank, w.gpu);
    std::printf("\n");
  }
  if (c_.order == Order::Random) {
    std::printf("# start order (seed %llu):", static_cast<unsigned long long>(c_.seed));
    for (int r : order_) std::printf(" %d", r);
    std::printf("\n");
  }
  std::fflush(stdout);
}

}  // namespace actorcc::bench
