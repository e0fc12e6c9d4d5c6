// actorcc-bench: nccl-tests style benchmark of actorcc collectives, with its own launcher
// (actors or torchrun style) and NCCL as a baseline in the same run. See --help.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "actorcc/error.hpp"
#include "bench.hpp"

int main(int argc, char** argv) {
  using namespace actorcc::bench;
  std::vector<std::string> args(argv + 1, argv + argc);
  Config c;
  try {
    bool help = false;
    c = parse_args(args, &help);
    if (help) {
      std::fputs(usage().c_str(), stdout);
      return kExitOk;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "actorcc-bench: %s\n", e.what());
    return kExitUsage;
  }
  if (c.worker) return worker_main(c);

  char self[PATH_MAX] = {0};
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string exe = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(argv[0]);
  std::vector<std::string> all(argv, argv + argc);
  try {
    return launcher_main(c, exe, all);
  } catch (const actorcc::InvalidArgument& e) {
    std::fprintf(stderr, "actorcc-bench: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "actorcc-bench: FAILED: %s\n", e.what());
    return kExitFailed;
  }
}
