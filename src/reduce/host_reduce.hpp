// Host-side reduction math for the CPU backend and for test references. Half types are
// converted to float32, reduced in float32 and rounded once (round-to-nearest-even), so a
// reduction over n inputs rounds exactly once, whatever n is.
#pragma once
#include <cstddef>
#include <cstdint>

#include "actorcc/types.hpp"

namespace actorcc {

float half_to_float(uint16_t h) noexcept;
uint16_t float_to_half(float f) noexcept;      // round to nearest even, inf/nan kept
float bfloat16_to_float(uint16_t b) noexcept;
uint16_t float_to_bfloat16(float f) noexcept;  // round to nearest even, nan kept quiet

// out[i] = op(ins[0][i], ins[1][i], ..., ins[n-1][i]) for i in [0, count), reduced in input
// order (ins[0] first) so every caller that passes the same order gets the same bits.
// Avg divides the sum by n (integer division for integer types). `out` may alias ins[k].
// Integer sum/prod wrap; integer avg sums exactly in 64 bits and truncates toward zero;
// min/max propagate NaN (any NaN input gives NaN). See host_reduce.cpp for the details.
void reduce_n(void* out, const void* const* ins, int n, size_t count, DataType dtype, RedOp op);

// Element i of a typed buffer as double (for references and checks), and the inverse.
double load_as_double(const void* buf, size_t i, DataType dtype) noexcept;
void store_from_double(void* buf, size_t i, double v, DataType dtype) noexcept;

}  // namespace actorcc
