// Without nvcc the library still builds: the CUDA entry points exist and say why they can't run.
#ifndef ACTORCC_WITH_CUDA
#include "backends/backend.hpp"
#include "topology/topology.hpp"

namespace actorcc {

bool cuda_usable(int) { return false; }
int cuda_resolve_device(int) { return -1; }

std::unique_ptr<BackendImpl> make_cuda_backend(GroupContext&) {
  throw UnsupportedError("this actorcc was built without CUDA (no nvcc at build time)");
}

std::unique_ptr<BackendImpl> make_gpu_hier_backend(GroupContext&) {
  throw UnsupportedError("this actorcc was built without CUDA, so without its GPU path across nodes");
}

std::unique_ptr<BackendImpl> make_nccl_backend(GroupContext&, const std::string&) {
  throw UnsupportedError("this actorcc was built without CUDA, so without its NCCL path");
}

namespace topology {
GpuIdentity gpu_identity(int) { return {}; }
}  // namespace topology

}  // namespace actorcc
#endif
