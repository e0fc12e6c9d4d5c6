// Input data whose collective results are exactly checkable, shared by the host check (CPU
// backend) and the CUDA fill/check kernels (gpu.cu). Values are small integers: every partial
// sum, product, min and max is then exact in every dtype (fp16 holds integers to 2048, bf16 to
// 256), whatever order a library reduces in, so a check is a bitwise compare.
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define BENCH_HD __host__ __device__
#else
#define BENCH_HD
#endif

namespace actorcc::bench {

// Mirrors actorcc::Collective / RedOp / DataType numbering (kept as ints so device code needs
// no actorcc header).
enum : int { kAllReduce = 0, kReduceScatter = 1, kAllGather = 2, kBroadcast = 3 };
enum : int { kSum = 0, kProd = 1, kMin = 2, kMax = 3, kAvg = 4 };

struct Pattern {
  int coll = kAllReduce;
  int op = kSum;
  int world = 1;
  int rank = 0;
  int root = 0;
  size_t chunk = 0;  // reduce_scatter: per-rank output count; all_gather: per-rank input count
};

// Element i of rank r's send buffer.
BENCH_HD inline double input_value(int op, int r, size_t i) {
  if (op == kProd) return ((static_cast<size_t>(r) + i) % 4 == 0) ? 2.0 : 1.0;  // small products
  if (op == kAvg) return static_cast<double>(i % 8 + 1);  // same on every rank: the mean is exact
  return static_cast<double>((static_cast<size_t>(r) * 3 + i) % 8 + 1);
}

BENCH_HD inline double reduce_over_ranks(int op, int world, size_t i) {
  double acc = input_value(op, 0, i);
  for (int q = 1; q < world; ++q) {
    double v = input_value(op, q, i);
    if (op == kSum || op == kAvg) acc += v;
    else if (op == kProd) acc *= v;
    else if (op == kMin) acc = v < acc ? v : acc;
    else acc = v > acc ? v : acc;
  }
  if (op == kAvg) acc /= world;
  return acc;
}

// Element j of this rank's receive buffer after the collective.
BENCH_HD inline double expected_value(const Pattern& p, size_t j) {
  switch (p.coll) {
    case kReduceScatter: return reduce_over_ranks(p.op, p.world, static_cast<size_t>(p.rank) * p.chunk + j);
    case kAllGather: return input_value(p.op, static_cast<int>(j / p.chunk), j % p.chunk);
    case kBroadcast: return input_value(p.op, p.root, j);
    default: return reduce_over_ranks(p.op, p.world, j);
  }
}

// What the receive buffer is filled with before a checked call (so stale data never passes).
inline constexpr double kSentinel = -3.0;

}  // namespace actorcc::bench
