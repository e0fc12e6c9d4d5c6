// The adapted-reduction matrix (nccl/src/adapt.hpp) that the CPU tier (test_adapt.cpp, ranks as
// threads) and the GPU tier (gpu_adapt.cu, ranks as processes) both run: every adapted dtype x
// op x collective, odd counts, in and out of place, fresh random inputs that every rank
// regenerates for every other rank, poisoned outputs, and a reference computed here from the
// formats' definitions (never from adapt_math.hpp, the code under test): exact integers, and
// float64 sums rounded once by a nearest-code search over the format's encodings.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "actorcc/communicator.hpp"
#include "adapt.hpp"
#include "common/reference.hpp"

namespace actorcc::ncclabi::testing {

// NCCL's enum values, written out here independently of the library's.
enum : int { Int8 = 0, Uint8, Int32, Uint32, Int64, Uint64, Float16, Float32, Float64, Bfloat16, E4m3, E5m2 };
enum : int { Sum = 0, Prod, Max, Min, Avg, PreMul = -1 };
inline constexpr int kTypeSize[12] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
inline const char* const kTypeName[12] = {"int8",    "uint8",   "int32",   "uint32", "int64", "uint64",
                                          "float16", "float32", "float64", "bf16",   "e4m3",  "e5m2"};
inline const char* const kOpName[5] = {"sum", "prod", "max", "min", "avg"};

// ---- fp8 by definition -----------------------------------------------------------------------
// e4m3 (OCP "fn"): bias 7, no inf, S.1111.111 is NaN, max 448. e5m2: bias 15, IEEE-like
// (inf and NaN in the all-ones exponent), max 57344.
inline double fp8_value(int t, uint8_t b) {
  const bool e4 = t == E4m3;
  const int mb = e4 ? 3 : 2, bias = e4 ? 7 : 15, emax = e4 ? 15 : 31;
  const int s = b >> 7, e = (b >> mb) & emax, m = b & ((1 << mb) - 1);
  double v;
  if (e4 && e == 15 && m == 7) return NAN;
  if (!e4 && e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp(m, 1 - bias - mb);
  else v = std::ldexp(1.0 + std::ldexp(m, -mb), e - bias);
  return s ? -v : v;
}
// The code of v: NaN -> the canonical positive NaN (0x7F e4m3, 0x7E e5m2); otherwise the nearest
// finite code, ties to the even code (mantissa LSB 0), so anything beyond the largest finite
// value, inf included, saturates to it (NCCL's __NV_SATFINITE).
inline uint8_t fp8_code(int t, double v) {
  if (std::isnan(v)) return t == E4m3 ? 0x7F : 0x7E;
  const int sign = std::signbit(v) ? 0x80 : 0;
  int best = -1;
  double bd = 0;
  for (int c = sign; c < sign + 128; ++c) {  // the codes of v's sign, zero included
    const double cv = fp8_value(t, static_cast<uint8_t>(c));
    if (!std::isfinite(cv)) continue;
    const double d = std::isinf(v) ? -std::fabs(cv) : std::fabs(cv - v);  // inf: the largest
    if (best < 0 || d < bd || (d == bd && (c & 1) == 0)) best = c, bd = d;
  }
  return static_cast<uint8_t>(best);
}

// ---- cases -----------------------------------------------------------------------------------
struct Case {
  int dtype;
  int op;  // PreMul: a PreMulSum op made for the call
  ReduceKind kind;
  size_t count;
  bool in_place;
  int residence = 1;  // PreMul: 1 host-immediate scalar, 0 a scalar read when the call runs
};
inline std::string describe(const Case& c) {
  static const char* const kinds[] = {"all_reduce", "reduce_scatter", "reduce"};
  return std::string(kinds[static_cast<int>(c.kind)]) + " " + kTypeName[c.dtype] + " " +
         (c.op == PreMul ? std::string(c.residence ? "premulsum(host)" : "premulsum(device)") : kOpName[c.op]) +
         " count " + std::to_string(c.count) + (c.in_place ? " in place" : "");
}

// Every adapted (dtype, op): unsigned min/max/avg, fp8 x every op, PreMulSum x every dtype.
inline std::vector<Case> all_cases(bool small) {
  std::vector<std::pair<int, int>> dops;
  for (int t : {Uint32, Uint64})
    for (int op : {Max, Min, Avg}) dops.push_back({t, op});
  for (int t : {E4m3, E5m2})
    for (int op : {Sum, Prod, Max, Min, Avg}) dops.push_back({t, op});
  for (int t = 0; t < 12; ++t) dops.push_back({t, PreMul});
  std::vector<Case> cases;
  const std::vector<size_t> counts = small ? std::vector<size_t>{1, 37} : std::vector<size_t>{1, 37, 1031};
  for (auto [t, op] : dops)
    for (ReduceKind k : {ReduceKind::AllReduce, ReduceKind::ReduceScatter, ReduceKind::Reduce})
      for (size_t n : counts)
        for (bool ip : {false, true}) {
          cases.push_back({t, op, k, n, ip, 1});
          if (op == PreMul && n == 37 && !ip) cases.push_back({t, op, k, n, ip, 0});
        }
  return cases;
}

// ---- inputs ----------------------------------------------------------------------------------
struct Gen {
  std::mt19937_64 rng;
  Gen(uint64_t seed, size_t case_id, int rank) : rng(testref::stream_of(seed, rank, case_id)) {}
  uint64_t bits() { return rng(); }
  int range(int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1)); }
};

// Element bits of one rank's input. PreMulSum inputs of float types are drawn so that every
// product rounds at most once (to the element type) and every sum of products is exact in the
// type the core accumulates in (float32 for float16/bfloat16/float32), whatever the order.
inline uint64_t input_bits(Gen& g, int t, int op) {
  const double sign = (g.bits() & 1) ? -1.0 : 1.0;
  switch (t) {
    case E4m3: case E5m2: {
      uint8_t b = static_cast<uint8_t>(g.bits());
      if ((op == Min || op == Max) && b == 0x80) b = 0;  // -0 vs +0: either is a right min
      return b;
    }
    case Float16: return testref::half_bits(sign * std::ldexp(g.range(1024, 2047), g.range(-3, 3) - 10));
    case Bfloat16: return testref::bfloat16_bits(sign * std::ldexp(g.range(128, 255), g.range(-3, 3) - 7));
    case Float32: {
      const float f = static_cast<float>(sign * std::ldexp(g.range(1, 255), g.range(-3, 2)));
      uint32_t u;
      std::memcpy(&u, &f, 4);
      return u;
    }
    case Float64: {
      const double d = sign * std::ldexp(g.range(1, 65535), g.range(-8, 8));
      uint64_t u;
      std::memcpy(&u, &d, 8);
      return u;
    }
    default: return g.bits();  // integers: every bit pattern (sums and products wrap)
  }
}
// The PreMulSum scalar of one rank (ranks may pass different scalars, as NCCL allows).
inline uint64_t scalar_bits(Gen& g, int t) {
  switch (t) {
    case Float16: return testref::half_bits(std::ldexp(g.range(1024, 2047), g.range(-1, 0) - 10));
    case Bfloat16: return testref::bfloat16_bits(std::ldexp(g.range(128, 255), g.range(-1, 0) - 7));
    case Float32: {
      const float f = static_cast<float>(std::ldexp(g.range(1, 256), -8));
      uint32_t u;
      std::memcpy(&u, &f, 4);
      return u;
    }
    case Float64: {
      const double d = std::ldexp(g.range(1, 65536), -16);
      uint64_t u;
      std::memcpy(&u, &d, 8);
      return u;
    }
    case E5m2: {
      // Within [1/16, 16]: with different scalars per rank, e5m2 products could otherwise span
      // more than float64's 53 bits, and their sum would round in the core's order.
      uint8_t b;
      do b = static_cast<uint8_t>(g.bits());
      while (!(std::fabs(fp8_value(E5m2, b)) >= 0.0625 && std::fabs(fp8_value(E5m2, b)) <= 16));
      return b;
    }
    default: return g.bits() & (kTypeSize[t] == 8 ? ~0ull : ((1ull << (8 * kTypeSize[t])) - 1));
  }
}

inline uint64_t mask_of(int t) { return kTypeSize[t] == 8 ? ~0ull : (1ull << (8 * kTypeSize[t])) - 1; }
inline double as_double(int t, uint64_t b) {
  switch (t) {
    case Float16: return testref::half_value(static_cast<uint16_t>(b));
    case Bfloat16: return testref::bfloat16_value(static_cast<uint16_t>(b));
    case Float32: { float f; uint32_t u = static_cast<uint32_t>(b); std::memcpy(&f, &u, 4); return f; }
    case Float64: { double d; std::memcpy(&d, &b, 8); return d; }
    default: return fp8_value(t, static_cast<uint8_t>(b));
  }
}
inline uint64_t from_double(int t, double v) {
  switch (t) {
    case Float16: return std::isnan(v) ? 0x7e00 : testref::half_bits(v);
    case Bfloat16: return testref::bfloat16_bits(v);
    case Float32: { float f = static_cast<float>(v); uint32_t u; std::memcpy(&u, &f, 4); return u; }
    case Float64: { uint64_t u; std::memcpy(&u, &v, 8); return u; }
    default: return fp8_code(t, v);
  }
}

// The expected bits of one output element from every rank's input element x[k] (and scalar s[k]).
inline uint64_t expected(int t, int op, const std::vector<uint64_t>& x, const std::vector<uint64_t>& s) {
  const int world = static_cast<int>(x.size());
  const uint64_t m = mask_of(t);
  const bool fp8 = t == E4m3 || t == E5m2;
  const bool integer = t <= Uint64;
  if (op == PreMul) {
    if (integer) {
      uint64_t acc = 0;
      for (int k = 0; k < world; ++k) acc += (x[k] * s[k]) & m;
      return acc & m;
    }
    // fp8: exact products and sum; others: each product rounded to the type once. The sum starts
    // from rank 0's term, not from +0, so that -0 + -0 stays -0.
    double acc = 0;
    for (int k = 0; k < world; ++k) {
      const double p = as_double(t, x[k]) * as_double(t, s[k]);
      const double term = fp8 ? p : as_double(t, from_double(t, p));
      acc = k ? acc + term : term;
    }
    return from_double(t, acc);
  }
  if (!fp8) {  // unsigned 32/64
    uint64_t acc = x[0] & m;
    for (int k = 1; k < world; ++k) {
      const uint64_t v = x[k] & m;
      if (op == Avg) acc = (acc + v) & m;
      else if (op == Max) acc = v > acc ? v : acc;
      else acc = v < acc ? v : acc;
    }
    return op == Avg ? acc / static_cast<uint64_t>(world) : acc;
  }
  double acc = as_double(t, x[0]);
  bool nan = std::isnan(acc);
  for (int k = 1; k < world; ++k) {
    const double v = as_double(t, x[k]);
    nan = nan || std::isnan(v);
    if (op == Sum || op == Avg) acc += v;
    else if (op == Prod) acc *= v;
    else if (op == Max) acc = v > acc ? v : acc;
    else acc = v < acc ? v : acc;
  }
  if (nan) return fp8_code(t, NAN);
  if (op == Avg) acc /= world;
  return fp8_code(t, acc);
}

// ---- running ---------------------------------------------------------------------------------
// Where the buffers live: host memory (CPU backend) or device memory (CUDA backend).
struct Mem {
  std::function<void*(size_t)> alloc;
  std::function<void(void*)> release;
  std::function<void(void* dev, const void* host, size_t)> put;
  std::function<void(void* host, const void* dev, size_t)> get;
  std::function<void()> sync;
  void* stream = nullptr;
};

// Host memory (8-byte aligned), for the CPU backend.
inline Mem host_mem() {
  Mem m;
  m.alloc = [](size_t n) -> void* { return new uint64_t[(n + 7) / 8 + 1]; };
  m.release = [](void* p) { delete[] static_cast<uint64_t*>(p); };
  m.put = [](void* d, const void* h, size_t n) { std::memcpy(d, h, n); };
  m.get = [](void* h, const void* d, size_t n) { std::memcpy(h, d, n); };
  m.sync = [] {};
  return m;
}

inline void put_bits(std::vector<uint8_t>& buf, size_t i, int t, uint64_t v) { std::memcpy(&buf[i * kTypeSize[t]], &v, kTypeSize[t]); }
inline uint64_t get_bits(const std::vector<uint8_t>& buf, size_t i, int t) {
  uint64_t v = 0;
  std::memcpy(&v, &buf[i * kTypeSize[t]], kTypeSize[t]);
  return v;
}

// Runs one case on this rank; returns "" or what went wrong (the first few bad elements).
inline std::string run_case(Communicator& comm, AdaptState& st, const Mem& mem, const Case& c, uint64_t seed,
                            size_t case_id) {
  const int world = comm.world_size(), rank = comm.rank();
  const int t = c.dtype, es = kTypeSize[t];
  const size_t n_in = c.kind == ReduceKind::ReduceScatter ? c.count * world : c.count;
  const int root = c.kind == ReduceKind::Reduce ? static_cast<int>(case_id % world) : 0;
  // Every rank's inputs and scalar, regenerated here from the shared seed.
  std::vector<std::vector<uint64_t>> in(world, std::vector<uint64_t>(n_in));
  std::vector<uint64_t> scal(world);
  for (int k = 0; k < world; ++k) {
    Gen g(seed, case_id, k);
    scal[k] = scalar_bits(g, t);
    for (auto& v : in[k]) v = input_bits(g, t, c.op);
  }
  std::vector<uint8_t> send_h(n_in * es), out_h(c.count * es, 0xA5);
  for (size_t i = 0; i < n_in; ++i) put_bits(send_h, i, t, in[rank][i]);
  // In place: recv is send (all-reduce, reduce) or the rank's block of send (reduce-scatter).
  const size_t send_bytes = send_h.size() + (c.in_place ? 0 : out_h.size());
  uint8_t* base = static_cast<uint8_t*>(mem.alloc(send_bytes));
  uint8_t* send = base;
  uint8_t* recv = c.in_place ? (c.kind == ReduceKind::ReduceScatter ? base + rank * c.count * es : base)
                             : base + send_h.size();
  mem.put(send, send_h.data(), send_h.size());
  if (!c.in_place) mem.put(recv, out_h.data(), out_h.size());
  void* scalar_dev = nullptr;
  int op = c.op;
  std::string err;
  if (c.op == PreMul) {
    if (c.residence == 0) {
      // The scalar changes after the op is made: a device-resident scalar is read when the call
      // runs, so the call must use the new value.
      scalar_dev = mem.alloc(8);
      const uint64_t stale = ~scal[rank];
      mem.put(scalar_dev, &stale, es);
    }
    uint64_t host_scalar = scal[rank];
    const int rc = create_premul(st, &op, c.residence ? static_cast<void*>(&host_scalar) : scalar_dev, t, c.residence);
    if (rc != 0) err = "create_premul returned " + std::to_string(rc);
    host_scalar = ~host_scalar;  // a host-immediate scalar was read at create time
    if (c.residence == 0) mem.put(scalar_dev, &scal[rank], es);
  }
  if (err.empty()) {
    const ReduceCall call{c.kind, send, recv, c.count, t, op, root, mem.stream};
    try {
      if (!run_adapted(comm, st, call)) err = "run_adapted did not take the call";
    } catch (const std::exception& e) {
      err = std::string("threw: ") + e.what();
    }
  }
  if (err.empty()) {
    mem.sync();
    mem.get(out_h.data(), recv, out_h.size());
    const bool gets = c.kind != ReduceKind::Reduce || rank == root;
    int bad = 0;
    std::vector<uint64_t> xs(world);
    for (size_t j = 0; j < c.count && bad < 3; ++j) {
      uint64_t want;
      if (gets) {
        const size_t src = c.kind == ReduceKind::ReduceScatter ? rank * c.count + j : j;
        for (int k = 0; k < world; ++k) xs[k] = in[k][src];
        want = expected(t, c.op, xs, scal);
      } else {  // a non-root's recv is not written (in place it still holds the input)
        want = c.in_place ? in[rank][j] & mask_of(t) : get_bits(std::vector<uint8_t>(es, 0xA5), 0, t);
      }
      const uint64_t got = get_bits(out_h, j, t);
      if (got != want) {
        char line[160];
        std::snprintf(line, sizeof line, "%s element %zu: got 0x%llx, want 0x%llx", bad ? ";" : "", j,
                      static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
        err += line;
        ++bad;
      }
    }
  }
  if (c.op == PreMul && op != PreMul && destroy_premul(st, op) != 0) err += " destroy_premul failed";
  mem.sync();
  mem.release(base);
  if (scalar_dev) mem.release(scalar_dev);
  return err.empty() ? err : "rank " + std::to_string(rank) + ": " + describe(c) + ": " + err;
}

// Every case on this rank (all ranks call it with the same seed); returns the failures.
inline std::vector<std::string> run_matrix(Communicator& comm, AdaptState& st, const Mem& mem, uint64_t seed,
                                           bool small) {
  std::vector<std::string> fails;
  const std::vector<Case> cases = all_cases(small);
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string e = run_case(comm, st, mem, cases[i], seed, i);
    if (!e.empty()) fails.push_back(e);
    if (e.find("threw") != std::string::npos) break;  // the group may be aborted: stop here
  }
  return fails;
}

}  // namespace actorcc::ncclabi::testing
