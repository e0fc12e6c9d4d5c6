#include "backends/hier/gpu_divide.hpp"

#include <algorithm>

#include "common/cuda_owners.hpp"
#include "kernels/reduce_ops.cuh"

namespace actorcc::hier {

namespace {

template <typename T>
__global__ void divide_kernel(T* buf, size_t count, int world) {
  using W = cuda::Widen<T>;
  using Acc = typename W::Acc;
  const Acc d = static_cast<Acc>(world);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    buf[i] = W::store(W::load(buf[i]) / d);
}

template <typename T>
void launch(void* buf, size_t count, int world, cudaStream_t s) {
  const unsigned threads = 256;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((count + threads - 1) / threads, 1024));
  divide_kernel<T><<<blocks, threads, 0, s>>>(static_cast<T*>(buf), count, world);
  cuda_rt::check(cudaGetLastError(), "launching the avg division");
}

}  // namespace

void divide_async(void* buf, size_t count, DataType dtype, int world, cudaStream_t stream) {
  if (!count) return;
  switch (dtype) {
    case DataType::Float32: return launch<float>(buf, count, world, stream);
    case DataType::Float64: return launch<double>(buf, count, world, stream);
    case DataType::Float16: return launch<cuda::Half>(buf, count, world, stream);
    case DataType::BFloat16: return launch<cuda::BFloat>(buf, count, world, stream);
    default: throw UnsupportedError("avg division: not a float type");
  }
}

}  // namespace actorcc::hier
