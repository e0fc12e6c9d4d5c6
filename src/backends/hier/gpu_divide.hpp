// Float Avg across nodes: the plans sum, then every element is divided once by the world (in
// float32 for float32 and the half types, in float64 for float64), as the CPU hierarchical
// path divides. Enqueued on `stream`.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "actorcc/types.hpp"

namespace actorcc::hier {

void divide_async(void* buf, size_t count, DataType dtype, int world, cudaStream_t stream);

}  // namespace actorcc::hier
