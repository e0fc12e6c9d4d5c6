// What one communicator's adapted reductions keep between calls: its PreMulSum ops and the
// scratch buffer the widened or scaled inputs go through. Private to nccl/src/adapt*.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "adapt.hpp"
#include "adapt_math.hpp"

namespace actorcc::ncclabi {

// One ncclRedOpCreatePreMulSum op: the datatype it was made for and its scalar, either the
// value's bits (ncclScalarHostImmediate, read at create time) or the pointer read by every
// call that uses it (ncclScalarDevice).
struct PremulOp {
  int dtype = 0;
  uint64_t scalar = 0;
  const void* scalar_ptr = nullptr;
};

// Grown on demand, never shrunk. On the CUDA backend a buffer that a CUDA graph captured stays
// allocated (retired, freed with the state) when a larger one replaces it, because the graph's
// kernels keep its address.
class Scratch {
 public:
  Scratch(bool cuda, int device) : cuda_(cuda), device_(device) {}
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  // A buffer of at least `bytes` (nullptr for 0). `capturing`: the call is being captured into a
  // CUDA graph, where allocating is refused (the caller reports it) and the buffer is pinned.
  void* get(size_t bytes, bool capturing, bool* refused);
  size_t size() const noexcept { return bytes_; }

 private:
  void release(void* p) noexcept;
  bool cuda_;
  int device_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  bool pinned_ = false;  // used inside a graph capture
  std::vector<void*> retired_;
  std::vector<uint64_t> host_;  // the CPU backend's buffer (8-byte aligned)
};

struct AdaptState {
  AdaptState(Communicator& c);
  Communicator* comm;
  std::mutex mu;  // ops and scratch: create/destroy may come from other threads than the calls
  std::unordered_map<int, PremulOp> ops;
  Scratch scratch;
  // The most scratch one call uses: a call whose converted input is larger runs as several
  // collectives (docs/nccl-types.md). Tests lower it to reach that path with small counts.
  size_t max_scratch = size_t{64} << 20;
};

// One element-wise pass, on the host (CPU backend) or on the call's stream (CUDA backend).
void host_xform(const Xform& x, const void* src, void* dst, size_t n);
#if defined(ACTORCC_WITH_CUDA)
namespace cuda {
void xform(const Xform& x, const void* src, void* dst, size_t n, void* stream, int device);  // throws CudaError
bool capturing(void* stream);                                                     // throws CudaError
void* alloc(size_t bytes, int device);                                           // throws CudaError
void free(void* p, int device) noexcept;
}  // namespace cuda
#endif

}  // namespace actorcc::ncclabi
