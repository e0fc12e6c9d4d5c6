// gpu.hpp for builds without CUDA: no GPU is ever found, and the worker never calls the rest.
#include <stdexcept>

#include "gpu.hpp"

namespace actorcc::bench::gpu {
namespace {
[[noreturn]] void no_cuda() { throw std::runtime_error("actorcc-bench was built without CUDA"); }
}  // namespace

Probe probe() {
  Probe p;
  p.error = "built without CUDA";
  return p;
}
void set_device(int) { no_cuda(); }
void* malloc_device(size_t) { no_cuda(); }
void free_device(void*) { no_cuda(); }
void* stream_create() { no_cuda(); }
void stream_destroy(void*) {}
void stream_sync(void*) { no_cuda(); }
void fill(void*, size_t, DataType, const Pattern&, size_t, bool, void*) { no_cuda(); }
size_t check(const void*, size_t, DataType, const Pattern&, void*) { no_cuda(); }
Timing time_calls(void*, int, int, int, const std::function<void()>&, const Verify&, bool) { no_cuda(); }

}  // namespace actorcc::bench::gpu
