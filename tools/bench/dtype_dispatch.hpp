// The element types of the checked data, shared by the host fill and reference (host_data.cpp)
// and the CUDA fill kernel (gpu.cu), which name the two 16-bit float types differently.
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

}  // namespace actorcc::bench
