// Host fill with the same values as the CUDA fill kernel, and the reference every check (CPU
// and CUDA backends alike) compares with (pattern.hpp).
#include "host_data.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <type_traits>
#include <utility>

#include "dtype_dispatch.hpp"
#include "reduce/host_reduce.hpp"

namespace actorcc::bench::host {
namespace {

struct Half {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};

// The library's IEEE conversions (round to nearest even; unit-tested in test_host_reduce) are
// the only library code the reference uses: the GPU kernels convert with CUDA's intrinsics.
template <typename T> T from_double(double v) { return static_cast<T>(v); }
template <> Half from_double<Half>(double v) { return Half{actorcc::float_to_half(static_cast<float>(v))}; }
template <> BF16 from_double<BF16>(double v) { return BF16{actorcc::float_to_bfloat16(static_cast<float>(v))}; }

template <typename T> constexpr bool kFloat = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BF16>;

// Rank r's input element i as a T.
template <typename T> T input(const Pattern& p, int r, size_t i) {
  if constexpr (kFloat<T>) return from_double<T>(float_input(p, r, i));
  else return static_cast<T>(int_input(p, r, i));
}

// The reduction of element i over the ranks, written from the library's documented semantics
// (not from its code): floats accumulate in float32 (float64 for double) in rank order and
// round once; integer sum/prod wrap; integer avg sums in 64 bits and divides toward zero.
template <typename T> T reduce_over_ranks(const Pattern& p, size_t i) {
  if constexpr (kFloat<T>) {
    using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
    Acc acc = static_cast<Acc>(float_input(p, 0, i));
    for (int q = 1; q < p.world; ++q) {
      const Acc x = static_cast<Acc>(float_input(p, q, i));
      switch (p.op) {
        case kProd: acc = acc * x; break;
        case kMin: acc = x < acc ? x : acc; break;
        case kMax: acc = x > acc ? x : acc; break;
        default: acc = acc + x; break;
      }
    }
    if (p.op == kAvg) acc = acc / static_cast<Acc>(p.world);
    return from_double<T>(static_cast<double>(acc));  // exact for float/double; one RNE for halves
  } else {
    uint64_t acc = static_cast<uint64_t>(int_input(p, 0, i));
    int64_t lo = int_input(p, 0, i), hi = lo;
    for (int q = 1; q < p.world; ++q) {
      const int64_t x = int_input(p, q, i);
      if (p.op == kProd) acc *= static_cast<uint64_t>(x);
      else acc += static_cast<uint64_t>(x);
      lo = x < lo ? x : lo;
      hi = x > hi ? x : hi;
    }
    switch (p.op) {
      case kMin: return static_cast<T>(lo);
      case kMax: return static_cast<T>(hi);
      case kAvg:
        if constexpr (std::is_signed_v<T>) return static_cast<T>(static_cast<int64_t>(acc) / p.world);
        else return static_cast<T>(acc / static_cast<uint64_t>(p.world));
      default: return static_cast<T>(acc);  // modular: the same bits as wrapping in T
    }
  }
}

// Element j of this rank's receive buffer after a correct collective.
template <typename T> T expected(const Pattern& p, size_t j) {
  switch (p.coll) {
    case kReduceScatter: return reduce_over_ranks<T>(p, static_cast<size_t>(p.rank) * p.chunk + j);
    case kAllGather: return input<T>(p, static_cast<int>(j / p.chunk), j % p.chunk);
    case kBroadcast: return input<T>(p, p.root, j);
    // send_recv: a ring, each rank's whole input from the rank before it.
    case kSendRecv: return input<T>(p, (p.rank + p.world - 1) % p.world, j);
    // all_to_all: block q is block `rank` of rank q's input.
    case kAllToAll: return input<T>(p, static_cast<int>(j / p.chunk), static_cast<size_t>(p.rank) * p.chunk + j % p.chunk);
    default: return reduce_over_ranks<T>(p, j);
  }
}

double to_double(float v) { return v; }
double to_double(double v) { return v; }
double to_double(Half v) { return actorcc::half_to_float(v.bits); }
double to_double(BF16 v) { return actorcc::bfloat16_to_float(v.bits); }

// The only inexact comparison: NCCL's float avg (it scales each input before summing, which
// rounds differently from the documented sum-then-divide); about two units in the last place.
double avg_tolerance(const Pattern& p) {
  if (!p.exact_in_type || p.op != kAvg) return 0;
  switch (p.dtype) {
    case kF32: return 3e-7;
    case kF16: return 2e-3;
    case kBF16: return 1.6e-2;
    case kF64: return 5e-16;
    default: return 0;
  }
}

template <typename F>
void dispatch(DataType t, F&& f) {
  dispatch_dtype<Half, BF16>(t, std::forward<F>(f));
}

// Runs f(lo, hi) over [0, count) in a few threads: a reference for 1 GiB on 8 ranks is ~2G
// hashes, which one thread per rank would take tens of seconds for.
template <typename F>
void parallel_ranges(size_t count, F&& f) {
  const size_t kMinPerThread = size_t(1) << 20;
  size_t n = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), 8);
  n = std::max<size_t>(1, std::min(n, count / kMinPerThread));
  if (n == 1) {
    f(size_t(0), count);
    return;
  }
  std::vector<std::thread> ts;
  const size_t per = (count + n - 1) / n;
  for (size_t k = 0; k < n; ++k) {
    const size_t lo = k * per, hi = std::min(count, lo + per);
    if (lo < hi) ts.emplace_back([&f, lo, hi] { f(lo, hi); });
  }
  for (auto& t : ts) t.join();
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
  if (sentinel) {
    std::memset(buf, kSentinelByte, count * dtype_size(t));
    return;
  }
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    T* b = static_cast<T*>(buf);
    parallel_ranges(count, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) b[i] = input<T>(p, p.rank, offset + i);
    });
  });
}

size_t check(const void* buf, size_t count, DataType t, const Pattern& p) {
  std::atomic<size_t> bad{0};
  const double tol = avg_tolerance(p);
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    const T* b = static_cast<const T*>(buf);
    parallel_ranges(count, [&](size_t lo, size_t hi) {
      size_t mine = 0;
      for (size_t i = lo; i < hi; ++i) {
        const T want = expected<T>(p, i);
        bool ok = std::memcmp(&want, &b[i], sizeof(T)) == 0;  // bitwise: -0 != +0, NaN != NaN
        if constexpr (kFloat<T>)
          if (!ok && tol > 0) ok = std::fabs(to_double(b[i]) - to_double(want)) <= tol * std::fabs(to_double(want));
        mine += ok ? 0 : 1;
      }
      bad += mine;
    });
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
