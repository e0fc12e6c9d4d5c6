// The CPU backend's passes: the same element maths as the CUDA kernels (adapt_math.hpp), on
// host buffers, synchronously (the CPU backend's collectives are synchronous too).
#include "adapt_state.hpp"

namespace actorcc::ncclabi {

void host_xform(const Xform& x, const void* src, void* dst, size_t n) {
  // A device-resident scalar is host memory on the CPU backend; read when the call runs.
  const uint64_t s = x.scalar_ptr ? load_bits(x.scalar_ptr, nccl_type_size(x.type)) : x.scalar;
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < n; ++i) xform_one(x, s, in, out, i);
}

}  // namespace actorcc::ncclabi
