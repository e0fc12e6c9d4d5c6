// gpu_launch: starts one group of GPU workers the way actor frameworks do — one process per
// rank, each seeing only the GPU it was given through CUDA_VISIBLE_DEVICES.
//   gpu_launch --devices 0,1 [--ids N] [--timeout S] [--nodes K] -- ./gpu_worker [worker args]
// It creates N UniqueIds (so this process hosts the roots), passes them to every worker as
// ACTORCC_TEST_IDS (comma-separated) with ACTORCC_TEST_RANK / ACTORCC_TEST_WORLD, waits for
// all workers (killing those it started when the timeout passes) and exits non-zero if any
// worker failed. --nodes K: the ranks in K virtual nodes of consecutive ranks (ACTORCC_NODE_ID,
// and NCCL_HOSTID so NCCL takes them for separate hosts), as actorcc-bench --nodes does.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actorcc/actorcc.hpp"
#include "launch_env.hpp"

extern char** environ;

int main(int argc, char** argv) {
  std::vector<std::string> devices;
  int nids = 4, timeout_s = 300, nodes = 1;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--devices" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      std::string d;
      while (std::getline(ss, d, ',')) devices.push_back(d);
    } else if (a == "--ids" && i + 1 < argc) {
      nids = std::atoi(argv[++i]);
    } else if (a == "--timeout" && i + 1 < argc) {
      timeout_s = std::atoi(argv[++i]);
    } else if (a == "--nodes" && i + 1 < argc) {
      nodes = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--") {
      ++i;
      break;
    }
  }
  if (devices.empty() || i >= argc) {
    std::fprintf(stderr, "usage: gpu_launch --devices 0,1 [--ids N] [--timeout S] [--nodes K] -- worker [args]\n");
    return 2;
  }
  std::string ids;
  for (int k = 0; k < nids; ++k) ids += (k ? "," : "") + actorcc::UniqueId::create("127.0.0.1").to_string();
  const int world = static_cast<int>(devices.size());

  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> env;
    // The launcher's own words replace any inherited ones; other ACTORCC_TEST_* settings
    // (ACTORCC_TEST_TUNE_ONLY) pass through.
    auto ours = [nodes](const char* e) {
      for (const char* k : {"CUDA_VISIBLE_DEVICES", gpu_launch::kRank, gpu_launch::kWorld, gpu_launch::kIds})
        if (std::strncmp(e, k, std::strlen(k)) == 0 && e[std::strlen(k)] == '=') return true;
      return nodes > 1 && (std::strncmp(e, "ACTORCC_NODE_ID=", 16) == 0 || std::strncmp(e, "NCCL_HOSTID=", 12) == 0);
    };
    for (char** e = environ; *e; ++e)
      if (!ours(*e)) env.push_back(*e);
    env.push_back("CUDA_VISIBLE_DEVICES=" + devices[r]);
    env.push_back(std::string(gpu_launch::kRank) + "=" + std::to_string(r));
    env.push_back(std::string(gpu_launch::kWorld) + "=" + std::to_string(world));
    env.push_back(std::string(gpu_launch::kIds) + "=" + ids);
    if (nodes > 1) {
      const int per_node = (world + nodes - 1) / nodes, node = std::min(r / per_node, nodes - 1);
      env.push_back("ACTORCC_NODE_ID=vnode" + std::to_string(node));
      env.push_back("NCCL_HOSTID=vnode" + std::to_string(node));
    }
    std::vector<char*> envp, args;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    for (int k = i; k < argc; ++k) args.push_back(argv[k]);
    args.push_back(nullptr);
    pid_t pid = -1;
    if (posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), envp.data()) != 0) {
      std::perror("posix_spawn");
      for (pid_t p : pids) kill(p, SIGKILL);
      return 3;
    }
    pids.push_back(pid);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::vector<int> status(world, -1);
  int left = world, failed = 0;
  while (left > 0) {
    for (int r = 0; r < world; ++r) {
      if (status[r] != -1) continue;
      int st = 0;
      pid_t w = waitpid(pids[r], &st, WNOHANG);
      if (w == pids[r]) {
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (status[r] != 0) {
          std::fprintf(stderr, "gpu_launch: rank %d (GPU %s) exited with %d\n", r, devices[r].c_str(), status[r]);
          ++failed;
        }
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "gpu_launch: timeout after %d s, killing the remaining workers\n", timeout_s);
      for (int r = 0; r < world; ++r)
        if (status[r] == -1) kill(pids[r], SIGKILL);
      timeout_s += 10;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      failed += 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return failed ? 1 : 0;
}
