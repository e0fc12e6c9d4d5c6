// Host fill with the same values as the CUDA fill kernel, and the check every result (CPU and
// CUDA backends alike) is compared with: the inputs of pattern.hpp, encoded and reduced by the
// test workers' reference (tests/common/reference.hpp). The bench holds no reduction maths of
// its own and uses no conversion of the library under test.
#include "host_data.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "common/reference.hpp"

namespace actorcc::bench::host {
namespace {
namespace ref = actorcc::testref;

// Writes rank r's input element i as element j of buf (exact in t: no rounding).
void store_input(void* buf, size_t j, const Pattern& p, DataType t, int r, size_t i) {
  if (is_float_type(p.dtype)) ref::store(buf, j, float_input(p, r, i), t);
  else ref::store_int(buf, j, int_input(p, r, i), t);
}

// Writes the reduction of element i over every rank's input as element j of buf.
void store_reduced(void* buf, size_t j, const Pattern& p, DataType t, size_t i) {
  const auto op = static_cast<RedOp>(p.op);
  if (is_float_type(p.dtype))
    ref::store(buf, j, ref::reduce_floats([&](int k) { return float_input(p, k, i); }, p.world, t, op), t);
  else
    ref::store_int(buf, j, ref::reduce_ints([&](int k) { return int_input(p, k, i); }, p.world, t, op), t);
}

// Writes element j of this rank's receive buffer after a correct collective into want[0].
void store_expected(void* want, const Pattern& p, DataType t, size_t j) {
  switch (p.coll) {
    case kReduceScatter: return store_reduced(want, 0, p, t, static_cast<size_t>(p.rank) * p.chunk + j);
    case kAllGather: return store_input(want, 0, p, t, static_cast<int>(j / p.chunk), j % p.chunk);
    case kBroadcast: return store_input(want, 0, p, t, p.root, j);
    // send_recv: a ring, each rank's whole input from the rank before it.
    case kSendRecv: return store_input(want, 0, p, t, (p.rank + p.world - 1) % p.world, j);
    // all_to_all: block q is block `rank` of rank q's input.
    case kAllToAll:
      return store_input(want, 0, p, t, static_cast<int>(j / p.chunk), static_cast<size_t>(p.rank) * p.chunk + j % p.chunk);
    default: return store_reduced(want, 0, p, t, j);
  }
}

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
  parallel_ranges(count, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) store_input(buf, i, p, t, p.rank, offset + i);
  });
}

size_t check(const void* buf, size_t count, DataType t, const Pattern& p) {
  std::atomic<size_t> bad{0};
  const double tol = avg_tolerance(p);
  const size_t es = dtype_size(t);
  const auto* got = static_cast<const uint8_t*>(buf);
  parallel_ranges(count, [&](size_t lo, size_t hi) {
    size_t mine = 0;
    uint64_t want = 0;  // one element of any type
    for (size_t i = lo; i < hi; ++i) {
      store_expected(&want, p, t, i);
      bool ok = std::memcmp(&want, got + i * es, es) == 0;  // bitwise: -0 != +0, NaN != NaN
      if (!ok && tol > 0) {
        const double w = ref::load(&want, 0, t);
        ok = std::fabs(ref::load(buf, i, t) - w) <= tol * std::fabs(w);
      }
      mine += ok ? 0 : 1;
    }
    bad += mine;
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
