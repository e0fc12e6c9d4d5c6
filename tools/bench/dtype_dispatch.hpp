// The element types of the checked data, shared by the host check (host_data.cpp) and the CUDA
// fill/check kernels (gpu.cu), which name the two 16-bit float types differently.
#pragma once
#include <cstdint>

#include "actorcc/types.hpp"
#include "pattern.hpp"

namespace actorcc::bench {

// Calls f(T{}) with T the C++ type of `t`; Half / BF16: the caller's 16-bit float types.
template <typename Half, typename BF16, typename F>
void dispatch_dtype(DataType t, F&& f) {
  switch (t) {
    case DataType::Float32: f(float{}); break;
    case DataType::Float16: f(Half{}); break;
    case DataType::BFloat16: f(BF16{}); break;
    case DataType::Float64: f(double{}); break;
    case DataType::Int8: f(int8_t{}); break;
    case DataType::UInt8: f(uint8_t{}); break;
    case DataType::Int32: f(int32_t{}); break;
    case DataType::Int64: f(int64_t{}); break;
  }
}

// Relative error a checked element may have: 0 (bitwise) except for avg, whose division rounds
// in the element type.
inline double check_tolerance(DataType t, int op) {
  if (op != kAvg) return 0;
  switch (t) {
    case DataType::Float32: return 1e-6;
    case DataType::Float16: return 1e-3;
    case DataType::BFloat16: return 1e-2;
    case DataType::Float64: return 1e-12;
    default: return 0;
  }
}

}  // namespace actorcc::bench
