// Host fill/check with the same values as the CUDA kernels (pattern.hpp).
#include "host_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "dtype_dispatch.hpp"

namespace actorcc::bench::host {
namespace {

struct Half {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};

uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float u2f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16, round to nearest even.
uint16_t float_to_half(float f) {
  uint32_t x = f2u(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return u2f(sign);
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 0x1f) return u2f(sign | 0x7f800000u | (mant << 13));
  return u2f(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t float_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float bf16_to_float(uint16_t b) { return u2f(static_cast<uint32_t>(b) << 16); }

template <typename T> T from_double(double v) { return static_cast<T>(static_cast<long long>(v)); }
template <> float from_double<float>(double v) { return static_cast<float>(v); }
template <> double from_double<double>(double v) { return v; }
template <> Half from_double<Half>(double v) { return Half{float_to_half(static_cast<float>(v))}; }
template <> BF16 from_double<BF16>(double v) { return BF16{float_to_bf16(static_cast<float>(v))}; }

template <typename T> double to_double(T v) { return static_cast<double>(v); }
template <> double to_double<Half>(Half v) { return half_to_float(v.bits); }
template <> double to_double<BF16>(BF16 v) { return bf16_to_float(v.bits); }

template <typename F>
void dispatch(DataType t, F&& f) {
  dispatch_dtype<Half, BF16>(t, std::forward<F>(f));
}

}  // namespace

Buffer::Buffer(size_t bytes) {
  size_t n = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
  p_ = std::aligned_alloc(4096, n);
  if (!p_) throw std::bad_alloc();
  std::memset(p_, 0, n);
}
Buffer::~Buffer() { std::free(p_); }
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    std::free(p_);
    p_ = o.p_;
    o.p_ = nullptr;
  }
  return *this;
}

void fill(void* buf, size_t count, DataType t, const Pattern& p, size_t offset, bool sentinel) {
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    T* b = static_cast<T*>(buf);
    for (size_t i = 0; i < count; ++i)
      b[i] = from_double<T>(sentinel ? kSentinel : input_value(p.op, p.rank, offset + i));
  });
}

size_t check(const void* buf, size_t count, DataType t, const Pattern& p) {
  size_t bad = 0;
  double tol = check_tolerance(t, p.op);
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    const T* b = static_cast<const T*>(buf);
    for (size_t i = 0; i < count; ++i) {
      double want = to_double<T>(from_double<T>(expected_value(p, i)));
      double got = to_double<T>(b[i]);
      bool ok = tol > 0 ? std::fabs(got - want) <= tol * std::fabs(want) : got == want;
      bad += ok ? 0 : 1;
    }
  });
  return bad;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace actorcc::bench::host
