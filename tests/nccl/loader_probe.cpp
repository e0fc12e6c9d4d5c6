// actorcc's NCCL loader (the rails of the hierarchical backend) in a process where actorcc's own
// libnccl.so.2 is preloaded: the name "libnccl.so.2" resolves to the ABI library, which the
// loader must skip, taking NVIDIA's NCCL from elsewhere (beside torch, the library path) or
// failing with a text that says so. Run with LD_PRELOAD=<the ABI library>.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "transport/nccl/nccl_loader.hpp"

int main() {
  if (!dlsym(RTLD_DEFAULT, "ncclActorccVersion")) {
    std::fprintf(stderr, "FAIL: run with LD_PRELOAD=<actorcc's libnccl.so.2>\n");
    return 1;
  }
  Dl_info abi{};
  dladdr(dlsym(RTLD_DEFAULT, "ncclActorccVersion"), &abi);
  try {
    auto lib = actorcc::nccl::NcclLib::load("libnccl.so.2");
    const std::string path = lib->path();
    if (path == abi.dli_fname) {
      std::fprintf(stderr, "FAIL: the loader took the ABI library %s\n", path.c_str());
      return 1;
    }
    std::printf("PASS: NVIDIA NCCL %s from %s (the ABI library %s skipped)\n", lib->version().c_str(), path.c_str(),
                abi.dli_fname);
  } catch (const std::exception& e) {
    if (!std::strstr(e.what(), "actorcc's own NCCL-ABI library")) {
      std::fprintf(stderr, "FAIL: unexpected error: %s\n", e.what());
      return 1;
    }
    std::printf("PASS: no NVIDIA NCCL here, and the loader says so: %s\n", e.what());
  }
  return 0;
}
