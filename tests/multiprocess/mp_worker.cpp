// One rank of a multiprocess test. Uses only the public API. Spawned by test_multiprocess.cpp:
//   mp_worker --id HEX --rank R --world W --mode MODE [--timeout-ms T] [--delay-ms D]
//             [--counts 0,1,7] [--big-subset] [--culprit C] [--hold-ms H] [--seed S]
// Modes:
//   matrix       every collective x dtype x op x count, in and out of place, checked
//   loop         all_reduce until a RemoteError (or TimeoutError) naming --culprit arrives
//                (the driver kills or stops that peer)
//   loop_a2a     the same with all_to_all
//   abort        rank --culprit calls abort(); the others expect a RemoteError naming it
//   join_error   joining must fail with InvalidArgument (tampered id, duplicate rank), or
//                with UnsupportedError given --expect unsupported
//   hold         join, print JOINED, wait --hold-ms, then a checked all_reduce
//   badargs      bad arguments raise InvalidArgument and the group stays usable
//   fault        rank --culprit injects --fault (kill | stop | exit | throw) at --phase
//                (before_join | during_join | large_call | between_calls), printing FAULT first;
//                the others loop all_reduce and expect an error naming the culprit
//   (--port P: form the group with from_address on 127.0.0.1:P, rank 0 hosting the root)
// Exit codes: 0 pass, 1 wrong data, 2 unexpected exception, 3 expectation not met.
// Progress lines go to stdout ("JOINED", "LOOPING"), diagnostics to stderr.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "actorcc/actorcc.hpp"

using namespace actorcc;

namespace {

struct Args {
  std::string id, mode = "matrix", expect = "invalid";  // join_error: invalid | unsupported
  std::string fault = "kill", phase = "between_calls";
  int port = 0;
  int rank = 0, world = 1, culprit = -1;
  int64_t timeout_ms = 60000, delay_ms = 0, hold_ms = 0, join_timeout_ms = 0;
  std::vector<size_t> counts = {0, 1, 7, 4097, size_t{1} << 20};
  bool big_subset = false;  // the largest count only for sum (keeps world 8 fast on 2 cores)
  uint64_t seed = 0;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--id") a.id = v;
    else if (k == "--rank") a.rank = std::stoi(v);
    else if (k == "--world") a.world = std::stoi(v);
    else if (k == "--mode") a.mode = v;
    else if (k == "--expect") a.expect = v;
    else if (k == "--timeout-ms") a.timeout_ms = std::stoll(v);
    else if (k == "--join-timeout-ms") a.join_timeout_ms = std::stoll(v);
    else if (k == "--delay-ms") a.delay_ms = std::stoll(v);
    else if (k == "--hold-ms") a.hold_ms = std::stoll(v);
    else if (k == "--culprit") a.culprit = std::stoi(v);
    else if (k == "--seed") a.seed = std::stoull(v);
    else if (k == "--big-subset") a.big_subset = v == "1";
    else if (k == "--fault") a.fault = v;
    else if (k == "--phase") a.phase = v;
    else if (k == "--port") a.port = std::stoi(v);
    else if (k == "--counts") {
      a.counts.clear();
      std::stringstream ss(v);
      for (std::string t; std::getline(ss, t, ',');) a.counts.push_back(std::stoull(t));
    }
  }
  return a;
}

// ---------------------------------------------------------------------------------------
// Values. Inputs are a pure function of (seed, rank, case, index), so every rank can
// regenerate every other rank's input for its reference. They are chosen so the float64
// reference is exact: small integers for sum/avg, powers of two for prod, k/8 for min/max.

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool is_float(DataType t) {
  return t == DataType::Float32 || t == DataType::Float16 || t == DataType::BFloat16 || t == DataType::Float64;
}

// One stream per (seed, rank, case); element i is one mix away (the checks evaluate this
// world x count times per call, so it must be cheap).
uint64_t stream_of(uint64_t seed, int rank, uint64_t case_id) {
  return mix(seed ^ mix(case_id * 1000003ull + static_cast<uint64_t>(rank)));
}

double input_value(uint64_t stream, size_t i, DataType t, RedOp op) {
  const uint64_t h = mix(stream + i * 0x9e3779b97f4a7c15ull);
  if (is_float(t)) {
    if (op == RedOp::Prod) {
      const double c[] = {-2, -1, -0.5, 0.5, 1, 2};
      return c[h % 6];
    }
    if (op == RedOp::Min || op == RedOp::Max) return (static_cast<int>(h % 255) - 127) / 8.0;
    return static_cast<int>(h % 9) - 4;
  }
  if (op == RedOp::Prod) return static_cast<int>(h % 7) - 3;
  switch (t) {
    case DataType::Int8: return static_cast<int>(h % 21) - 10;
    case DataType::UInt8: return static_cast<int>(h % 21);
    case DataType::Int32: return static_cast<int64_t>(h % 2000001) - 1000000;
    default: return static_cast<double>(static_cast<int64_t>(h % 2000000000001ull) - 1000000000000ll);
  }
}

// Exact encodings (the values above are representable in every type).
uint16_t half_bits_exact(double v) {
  if (v == 0) return std::signbit(v) ? 0x8000 : 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  int e;
  const double m = std::frexp(std::fabs(v), &e);  // v = m * 2^e, m in [0.5, 1)
  const int exp = e - 1 + 15;
  if (exp <= 0) return sign | static_cast<uint16_t>(std::ldexp(std::fabs(v), 24));
  return sign | static_cast<uint16_t>(exp << 10) | static_cast<uint16_t>(std::ldexp(m * 2 - 1, 10));
}
double half_value(uint16_t h) {
  const double s = (h >> 15) ? -1 : 1;
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return m ? NAN : s * INFINITY;
  if (e == 0) return s * std::ldexp(m, -24);
  return s * std::ldexp(1024 + m, e - 25);
}

void store(void* buf, size_t i, double v, DataType t) {
  switch (t) {
    case DataType::Float32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DataType::Float64: static_cast<double*>(buf)[i] = v; break;
    case DataType::Float16: static_cast<uint16_t*>(buf)[i] = half_bits_exact(v); break;
    case DataType::BFloat16: {
      const float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      static_cast<uint16_t*>(buf)[i] = static_cast<uint16_t>(u >> 16);
      break;
    }
    case DataType::Int8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case DataType::UInt8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case DataType::Int32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case DataType::Int64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
  }
}

double load(const void* buf, size_t i, DataType t) {
  switch (t) {
    case DataType::Float32: return static_cast<const float*>(buf)[i];
    case DataType::Float64: return static_cast<const double*>(buf)[i];
    case DataType::Float16: return half_value(static_cast<const uint16_t*>(buf)[i]);
    case DataType::BFloat16: {
      const uint32_t u = static_cast<uint32_t>(static_cast<const uint16_t*>(buf)[i]) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case DataType::Int8: return static_cast<const int8_t*>(buf)[i];
    case DataType::UInt8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::Int32: return static_cast<const int32_t*>(buf)[i];
    case DataType::Int64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
  }
  return 0;
}

// Exact expected result of reducing inputs xs (in rank order) with op, in the dtype's rules:
// integer sum/prod wrap, integer avg truncates the exact sum, float avg divides once (in
// float32 for float32/halves). Returns {value, tolerance}.
struct Expect {
  double v;
  double tol;
  bool int_wrapped = false;
  int64_t iv = 0;
};

int64_t wrap_to(int64_t v, DataType t) {
  switch (t) {
    case DataType::Int8: return static_cast<int8_t>(static_cast<uint8_t>(v));
    case DataType::UInt8: return static_cast<uint8_t>(v);
    case DataType::Int32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    default: return v;
  }
}

Expect reduce_ref(const std::vector<double>& xs, DataType t, RedOp op) {
  const int n = static_cast<int>(xs.size());
  if (!is_float(t)) {
    uint64_t acc = static_cast<uint64_t>(static_cast<int64_t>(xs[0]));
    int64_t mn = static_cast<int64_t>(xs[0]), mx = mn;
    for (int k = 1; k < n; ++k) {
      const int64_t x = static_cast<int64_t>(xs[k]);
      if (op == RedOp::Prod) acc *= static_cast<uint64_t>(x); else acc += static_cast<uint64_t>(x);
      mn = std::min(mn, x);
      mx = std::max(mx, x);
    }
    int64_t r = 0;
    switch (op) {
      case RedOp::Sum:
      case RedOp::Prod: r = wrap_to(static_cast<int64_t>(acc), t); break;
      case RedOp::Min: r = mn; break;
      case RedOp::Max: r = mx; break;
      case RedOp::Avg: r = static_cast<int64_t>(acc) / n; break;
    }
    return {static_cast<double>(r), 0, true, r};
  }
  double acc = xs[0], mn = xs[0], mx = xs[0];
  for (int k = 1; k < n; ++k) {
    if (op == RedOp::Prod) acc *= xs[k]; else acc += xs[k];
    mn = std::min(mn, xs[k]);
    mx = std::max(mx, xs[k]);
  }
  if (op == RedOp::Min) return {mn, 0};
  if (op == RedOp::Max) return {mx, 0};
  if (op != RedOp::Avg) return {acc, 0};
  if (t == DataType::Float64) return {acc / n, 0};
  const double q = static_cast<float>(acc) / static_cast<float>(n);  // exactly what float32 gives
  if (t == DataType::Float32) return {q, 0};
  // Half types: one rounding of q; allow one unit in the last place of the type.
  const int mant = t == DataType::Float16 ? 10 : 7;
  int e;
  std::frexp(q == 0 ? 1.0 : q, &e);
  const double ulp = std::ldexp(1.0, std::max(e - 1, t == DataType::Float16 ? -14 : -126) - mant);
  return {q, ulp};
}

bool matches(const void* buf, size_t i, DataType t, const Expect& e) {
  if (e.int_wrapped) {
    switch (t) {
      case DataType::Int64: return static_cast<const int64_t*>(buf)[i] == e.iv;
      default: return static_cast<int64_t>(load(buf, i, t)) == e.iv;
    }
  }
  const double got = load(buf, i, t);
  return e.tol == 0 ? got == e.v : std::fabs(got - e.v) <= e.tol;
}

uint64_t fnv(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ull;
  return h;
}

constexpr uint8_t kPoison = 0xAB;
constexpr size_t kGuard = 64;  // poisoned bytes after every output that must stay untouched

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------------------------------
// The matrix.

// Inputs repeat with a prime period (65537) along the element index, so the reference needs
// at most world x period evaluations per call and the check is a memcmp against a table,
// while every element is still checked. The period is coprime with every chunk and slice
// size the backend uses, so a misplaced chunk cannot go unnoticed.
constexpr size_t kPeriod = 65537;

void store_int(void* buf, size_t i, int64_t v, DataType t) {
  const size_t es = dtype_size(t);
  std::memcpy(static_cast<uint8_t*>(buf) + i * es, &v, es);  // low bytes: the wrap (little-endian)
}

class Matrix {
 public:
  Matrix(Communicator& c, const Args& a, uint64_t seed) : c_(c), a_(a), seed_(seed), me_(c.rank()), n_(c.world_size()) {}

  void run_all() {
    const DataType dtypes[] = {DataType::Float32, DataType::Float16, DataType::BFloat16, DataType::Float64,
                               DataType::Int8,    DataType::UInt8,   DataType::Int32,    DataType::Int64};
    const RedOp ops[] = {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::Avg};
    const size_t biggest = *std::max_element(a_.counts.begin(), a_.counts.end());
    for (size_t count : a_.counts) {
      const bool thin = a_.big_subset && count == biggest && count > 4097;
      for (bool in_place : {false, true}) {
        for (DataType t : dtypes) {
          for (RedOp op : ops) {
            if (thin && op != RedOp::Sum) continue;
            all_reduce(t, op, count, in_place);
            reduce_scatter(t, op, count, in_place);
          }
          all_gather(t, count, in_place);
          broadcast(t, count, in_place);
        }
        c_.barrier();
      }
    }
  }

  // Point-to-point and the collectives built on it (and reduce): every dtype x count; roots,
  // peers and all_to_all_v counts vary with the case number.
  void run_p2p() {
    const DataType dtypes[] = {DataType::Float32, DataType::Float16, DataType::BFloat16, DataType::Float64,
                               DataType::Int8,    DataType::UInt8,   DataType::Int32,    DataType::Int64};
    const RedOp ops[] = {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::Avg};
    for (size_t count : a_.counts) {
      for (DataType t : dtypes) {
        ring_batch(t, count);
        pairs(t, count);
        all_to_all(t, count);
        all_to_all_v(t, count);
        gather(t, count, false);
        gather(t, count, true);
        scatter(t, count, false);
        scatter(t, count, true);
        for (RedOp op : ops) reduce(t, op, count);
      }
      c_.barrier();
    }
  }

 private:
  // Encoded values of one pattern of `m` positions (m <= kPeriod), plus per-position
  // tolerances where the result may differ from the exact value by one rounding.
  struct Table {
    size_t m = 0;
    std::vector<uint8_t> bytes;
    std::vector<double> value, tol;  // only for tolerance checks
    bool exact = true;
  };

  std::string where(const char* coll, DataType t, RedOp op, size_t count, bool in_place) const {
    std::ostringstream os;
    os << "rank " << me_ << " " << coll << " " << to_string(t) << " " << to_string(op) << " count=" << count
       << (in_place ? " in-place" : " out-of-place") << " case=" << case_ << " seed=" << seed_;
    return os.str();
  }
  uint64_t stream(int rank) const { return stream_of(seed_, rank, case_); }

  Table input_table(int rank, size_t m, DataType t, RedOp op) const {
    Table tb;
    tb.m = m;
    tb.bytes.resize(m * dtype_size(t));
    const uint64_t s = stream(rank);
    for (size_t k = 0; k < m; ++k) store(tb.bytes.data(), k, input_value(s, k, t, op), t);
    return tb;
  }
  Table reduced_table(size_t m, DataType t, RedOp op) const {
    Table tb;
    tb.m = m;
    tb.bytes.resize(m * dtype_size(t));
    std::vector<uint64_t> ss(n_);
    for (int r = 0; r < n_; ++r) ss[r] = stream(r);
    std::vector<double> xs(n_);
    for (size_t k = 0; k < m; ++k) {
      for (int r = 0; r < n_; ++r) xs[r] = input_value(ss[r], k, t, op);
      const Expect e = reduce_ref(xs, t, op);
      if (e.int_wrapped) store_int(tb.bytes.data(), k, e.iv, t);
      else store(tb.bytes.data(), k, e.v, t);
      if (e.tol > 0) tb.exact = false;
      tb.value.push_back(e.v);
      tb.tol.push_back(e.tol);
    }
    return tb;
  }
  // buf[i] = pattern[(j0 + i) % m] for i < n.
  static void fill(void* buf, size_t n, size_t j0, const Table& tb, size_t es) {
    for (size_t i = 0; i < n;) {
      const size_t k = (j0 + i) % tb.m, len = std::min(n - i, tb.m - k);
      std::memcpy(static_cast<uint8_t*>(buf) + i * es, tb.bytes.data() + k * es, len * es);
      i += len;
    }
  }
  // Checks buf[i] against pattern position (j0 + i) % m for i < n.
  void check(const void* buf, size_t n, size_t j0, const Table& tb, DataType t, const std::string& w) const {
    const size_t es = dtype_size(t);
    for (size_t i = 0; i < n;) {
      const size_t k0 = (j0 + i) % tb.m, len = std::min(n - i, tb.m - k0);
      const auto* got = static_cast<const uint8_t*>(buf) + i * es;
      if (!tb.exact || std::memcmp(got, tb.bytes.data() + k0 * es, len * es) != 0) {
        for (size_t q = 0; q < len; ++q) {
          const size_t k = k0 + q;
          const bool ok = tb.exact || tb.tol[k] == 0
                              ? std::memcmp(got + q * es, tb.bytes.data() + k * es, es) == 0
                              : std::fabs(load(got, q, t) - tb.value[k]) <= tb.tol[k];
          if (!ok) {
            std::ostringstream os;
            os << w << ": element " << i + q << " is " << load(got, q, t) << ", expected "
               << load(tb.bytes.data(), k, t);
            throw Failure(os.str());
          }
        }
      }
      i += len;
    }
  }
  void check_guard(const std::vector<uint8_t>& buf, size_t used, const std::string& w) const {
    for (size_t i = used; i < buf.size(); ++i)
      if (buf[i] != kPoison) throw Failure(w + ": wrote past the end of the output (byte " + std::to_string(i) + ")");
  }
  // Results checked with a tolerance must still be bitwise identical on all ranks (exactly
  // checked ones are, by equality with the same table).
  void check_identical(const void* p, size_t bytes, const std::string& w) {
    const uint64_t h = fnv(p, bytes);
    auto all = c_.allgather_bytes(std::string(reinterpret_cast<const char*>(&h), sizeof h));
    for (int r = 0; r < n_; ++r)
      if (all[r] != all[0]) throw Failure(w + ": rank " + std::to_string(r) + "'s result differs bitwise from rank 0's");
  }

  void all_reduce(DataType t, RedOp op, size_t count, bool in_place) {
    ++case_;
    const size_t es = dtype_size(t), m = std::min(count, kPeriod);
    const std::string w = where("all_reduce", t, op, count, in_place);
    std::vector<uint8_t> send(count * es + kGuard, kPoison), recv(count * es + kGuard, kPoison);
    if (count) fill(send.data(), count, 0, input_table(me_, m, t, op), es);
    void* out = in_place ? send.data() : recv.data();
    c_.all_reduce(send.data(), out, count, t, op);
    if (!count) return check_guard(recv, 0, w);
    const Table ref = reduced_table(m, t, op);
    check(out, count, 0, ref, t, w);
    check_guard(in_place ? send : recv, count * es, w);
    if (!ref.exact) check_identical(out, count * es, w);
  }

  void reduce_scatter(DataType t, RedOp op, size_t count, bool in_place) {
    ++case_;
    const size_t es = dtype_size(t), total = count * n_, m = std::min(total, kPeriod);
    const std::string w = where("reduce_scatter", t, op, count, in_place);
    std::vector<uint8_t> send(total * es + kGuard, kPoison), recv(count * es + kGuard, kPoison);
    if (count) fill(send.data(), total, 0, input_table(me_, m, t, op), es);
    uint8_t* out = in_place ? send.data() + me_ * count * es : recv.data();
    c_.reduce_scatter(send.data(), out, count, t, op);
    if (count) check(out, count, me_ * count, reduced_table(m, t, op), t, w);
    check_guard(in_place ? send : recv, in_place ? total * es : count * es, w);
  }

  void all_gather(DataType t, size_t count, bool in_place) {
    ++case_;
    const size_t es = dtype_size(t), total = count * n_, m = std::min(count, kPeriod);
    const std::string w = where("all_gather", t, RedOp::Sum, count, in_place);
    std::vector<uint8_t> recv(total * es + kGuard, kPoison), send(count * es + kGuard, kPoison);
    uint8_t* in = in_place ? recv.data() + me_ * count * es : send.data();
    if (count) fill(in, count, 0, input_table(me_, m, t, RedOp::Sum), es);
    c_.all_gather(in, recv.data(), count, t);
    for (int r = 0; r < n_ && count; ++r)
      check(recv.data() + r * count * es, count, 0, input_table(r, m, t, RedOp::Sum), t,
            w + " (block of rank " + std::to_string(r) + ")");
    check_guard(recv, total * es, w);
  }

  void broadcast(DataType t, size_t count, bool in_place) {
    ++case_;
    const int root = static_cast<int>(case_ % static_cast<uint64_t>(n_));
    const size_t es = dtype_size(t), m = std::min(count, kPeriod);
    const std::string w = where("broadcast", t, RedOp::Sum, count, in_place) + " root=" + std::to_string(root);
    std::vector<uint8_t> send(count * es + kGuard, kPoison), recv(count * es + kGuard, kPoison);
    if (count && me_ == root) fill(send.data(), count, 0, input_table(root, m, t, RedOp::Sum), es);
    uint8_t* out = in_place ? send.data() : recv.data();
    c_.broadcast(send.data(), out, count, t, root);
    if (count) check(out, count, 0, input_table(root, m, t, RedOp::Sum), t, w);
    check_guard(in_place ? send : recv, count * es, w);
  }

  // The message rank `from` sends to rank `to` in case `case_` (tag: which of its messages):
  // pattern of `from` shifted by the destination, so a block delivered to the wrong rank or
  // place cannot match.
  Table msg_table(int from, size_t m, DataType t) const { return input_table(from, m, t, RedOp::Sum); }
  static size_t shift(int to, int tag) { return static_cast<size_t>(to) * 7919 + static_cast<size_t>(tag) * 104729; }

  // One batch: a message to every other rank at distance k (a ring per k, all at once), two
  // messages of different sizes to the right neighbour (order on one channel), and a copy to
  // itself. Everything that would deadlock as separate blocking calls.
  void ring_batch(DataType t, size_t count) {
    ++case_;
    const size_t es = dtype_size(t), m = std::min(std::max<size_t>(count, 1), kPeriod);
    const std::string w = where("send_recv batch", t, RedOp::Sum, count, false);
    std::vector<std::vector<uint8_t>> bufs;
    std::vector<P2POp> ops;
    struct Want { size_t buf; int from; int tag; size_t n; };
    std::vector<Want> wants;
    const Table mine = msg_table(me_, m, t);
    auto add_send = [&](int to, int tag, size_t n) {
      bufs.emplace_back(n * es + kGuard, kPoison);
      if (n) fill(bufs.back().data(), n, shift(to, tag), mine, es);
      ops.push_back({P2POp::Kind::Send, bufs.back().data(), n, t, to});
    };
    auto add_recv = [&](int from, int tag, size_t n) {
      bufs.emplace_back(n * es + kGuard, kPoison);
      ops.push_back({P2POp::Kind::Recv, bufs.back().data(), n, t, from});
      wants.push_back({bufs.size() - 1, from, tag, n});
    };
    bufs.reserve(4 * n_ + 8);  // ops hold pointers into bufs
    // Receives first on odd ranks, sends first on even ones: the order within a batch must not matter.
    for (int pass = 0; pass < 2; ++pass) {
      const bool sends = (pass == 0) == (me_ % 2 == 0);
      for (int k = 1; k < n_; ++k) {
        if (sends) add_send((me_ + k) % n_, k, count);
        else add_recv((me_ - k + n_) % n_, k, count);
      }
      if (sends) add_send((me_ + 1) % n_, 100, count / 2 + 1);
      else add_recv((me_ - 1 + n_) % n_, 100, count / 2 + 1);
    }
    add_send(me_, 200, count);
    add_recv(me_, 200, count);
    c_.send_recv(ops);
    for (const Want& x : wants) {
      const std::string ww = w + " (message " + std::to_string(x.tag) + " from rank " + std::to_string(x.from) + ")";
      if (x.n) check(bufs[x.buf].data(), x.n, shift(me_, x.tag), msg_table(x.from, m, t), t, ww);
      check_guard(bufs[x.buf], x.n * es, ww);
    }
  }

  // Blocking send and recv between pairs (2i, 2i+1): there and back; an odd last rank waits.
  void pairs(DataType t, size_t count) {
    ++case_;
    const size_t es = dtype_size(t), m = std::min(std::max<size_t>(count, 1), kPeriod);
    const std::string w = where("send/recv", t, RedOp::Sum, count, false);
    const int partner = me_ ^ 1;
    if (partner >= n_) return;
    std::vector<uint8_t> out(count * es + kGuard, kPoison), in(count * es + kGuard, kPoison);
    if (count) fill(out.data(), count, shift(partner, 1), msg_table(me_, m, t), es);
    for (int leg = 0; leg < 2; ++leg) {
      const bool sender = (me_ % 2) == leg;
      if (sender) c_.send(out.data(), count, t, partner);
      else c_.recv(in.data(), count, t, partner);
    }
    if (count) check(in.data(), count, shift(me_, 1), msg_table(partner, m, t), t, w);
    check_guard(in, count * es, w);
  }

  void all_to_all(DataType t, size_t count) {
    ++case_;
    const size_t es = dtype_size(t), total = count * n_, m = std::min(std::max<size_t>(total, 1), kPeriod);
    const std::string w = where("all_to_all", t, RedOp::Sum, count, false);
    std::vector<uint8_t> send(total * es + kGuard, kPoison), recv(total * es + kGuard, kPoison);
    if (total) fill(send.data(), total, 0, msg_table(me_, m, t), es);
    c_.all_to_all(send.data(), recv.data(), count, t);
    // Block r of the output is block `me` of rank r's input.
    for (int r = 0; r < n_ && count; ++r)
      check(recv.data() + r * count * es, count, me_ * count, msg_table(r, m, t), t,
            w + " (block from rank " + std::to_string(r) + ")");
    check_guard(recv, total * es, w);
  }

  // Rank `from` sends this many elements to rank `to` (0 for some pairs, up to 2 x count).
  size_t v_count(int from, int to, size_t count) const {
    const uint64_t h = mix(stream(from) ^ mix(static_cast<uint64_t>(to) + 77));
    return h % 5 == 0 ? 0 : h % (2 * count + 2);
  }

  void all_to_all_v(DataType t, size_t count) {
    ++case_;
    const size_t es = dtype_size(t);
    const std::string w = where("all_to_all_v", t, RedOp::Sum, count, false);
    std::vector<size_t> sc(n_), rc(n_), in_total(n_, 0);
    for (int r = 0; r < n_; ++r)
      for (int k = 0; k < n_; ++k) in_total[r] += v_count(r, k, count);
    for (int k = 0; k < n_; ++k) {
      sc[k] = v_count(me_, k, count);
      rc[k] = v_count(k, me_, count);
    }
    size_t out_total = 0;
    for (size_t x : rc) out_total += x;
    auto period = [&](int r) { return std::min(std::max<size_t>(in_total[r], 1), kPeriod); };
    std::vector<uint8_t> send(in_total[me_] * es + kGuard, kPoison), recv(out_total * es + kGuard, kPoison);
    if (in_total[me_]) fill(send.data(), in_total[me_], 0, msg_table(me_, period(me_), t), es);
    c_.all_to_all_v(send.data(), sc, recv.data(), rc, t);
    size_t at = 0;
    for (int r = 0; r < n_; ++r) {
      size_t from_off = 0;  // where rank r's block for us starts in rank r's input
      for (int k = 0; k < me_; ++k) from_off += v_count(r, k, count);
      if (rc[r])
        check(recv.data() + at * es, rc[r], from_off, msg_table(r, period(r), t), t,
              w + " (block from rank " + std::to_string(r) + ")");
      at += rc[r];
    }
    check_guard(recv, out_total * es, w);
  }

  int root_of_case() const { return static_cast<int>(mix(case_ + seed_) % static_cast<uint64_t>(n_)); }

  void gather(DataType t, size_t count, bool in_place) {
    ++case_;
    const int root = root_of_case();
    const size_t es = dtype_size(t), total = count * n_, m = std::min(std::max<size_t>(count, 1), kPeriod);
    const std::string w = where("gather", t, RedOp::Sum, count, in_place) + " root=" + std::to_string(root);
    std::vector<uint8_t> send(count * es + kGuard, kPoison), recv(total * es + kGuard, kPoison);
    uint8_t* in = in_place && me_ == root ? recv.data() + me_ * count * es : send.data();
    if (count) fill(in, count, 0, msg_table(me_, m, t), es);
    // Non-roots pass no output in half the cases (it is unused there), a poisoned one otherwise.
    void* out = me_ == root || case_ % 2 ? recv.data() : nullptr;
    c_.gather(in, out, count, t, root);
    if (me_ == root) {
      for (int r = 0; r < n_ && count; ++r)
        check(recv.data() + r * count * es, count, 0, msg_table(r, m, t), t,
              w + " (block of rank " + std::to_string(r) + ")");
      check_guard(recv, total * es, w);
    } else {
      check_guard(recv, 0, w + " (non-root output must stay untouched)");
    }
  }

  void scatter(DataType t, size_t count, bool in_place) {
    ++case_;
    const int root = root_of_case();
    const size_t es = dtype_size(t), total = count * n_, m = std::min(std::max<size_t>(total, 1), kPeriod);
    const std::string w = where("scatter", t, RedOp::Sum, count, in_place) + " root=" + std::to_string(root);
    std::vector<uint8_t> send(total * es + kGuard, kPoison), recv(count * es + kGuard, kPoison);
    if (me_ == root && total) fill(send.data(), total, 0, msg_table(root, m, t), es);
    uint8_t* out = in_place && me_ == root ? send.data() + me_ * count * es : recv.data();
    const void* in = me_ == root || case_ % 2 ? send.data() : nullptr;
    c_.scatter(in, out, count, t, root);
    if (count) check(out, count, me_ * count, msg_table(root, m, t), t, w);
    if (me_ == root) check_guard(send, total * es, w);
    if (!(in_place && me_ == root)) check_guard(recv, count * es, w);
  }

  void reduce(DataType t, RedOp op, size_t count) {
    ++case_;
    const int root = root_of_case();
    const size_t es = dtype_size(t), m = std::min(std::max<size_t>(count, 1), kPeriod);
    const bool in_place = case_ % 2 == 0;
    const std::string w = where("reduce", t, op, count, in_place) + " root=" + std::to_string(root);
    std::vector<uint8_t> send(count * es + kGuard, kPoison), recv(count * es + kGuard, kPoison);
    if (count) fill(send.data(), count, 0, input_table(me_, m, t, op), es);
    const std::vector<uint8_t> sent = send;
    void* out = in_place ? static_cast<void*>(send.data()) : recv.data();
    c_.reduce(send.data(), out, count, t, op, root);
    if (me_ == root) {
      if (!count) return;
      const Table ref = reduced_table(m, t, op);
      check(out, count, 0, ref, t, w);
      check_guard(in_place ? send : recv, count * es, w);
    } else {
      // Non-roots: neither the input nor the (unused) output may change.
      if (send != sent) throw Failure(w + ": a non-root's input changed");
      check_guard(recv, 0, w + " (non-root output must stay untouched)");
    }
  }

  Communicator& c_;
  const Args& a_;
  uint64_t seed_;
  int me_, n_;
  uint64_t case_ = 0;
};

// Rank 0 picks a fresh seed (or --seed) and shares it, so every run tests new inputs and a
// failure message carries what reproduces it.
uint64_t agree_seed(Communicator& c, uint64_t forced) {
  uint64_t s = forced ? forced : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  auto all = c.allgather_bytes(std::string(reinterpret_cast<const char*>(&s), sizeof s));
  std::memcpy(&s, all.at(0).data(), sizeof s);
  return s;
}

Options options_for(const Args& a) {
  Options o;
  o.backend = Backend::Cpu;
  o.timeout = std::chrono::milliseconds(a.timeout_ms);
  o.join_timeout = std::chrono::milliseconds(a.join_timeout_ms > 0 ? a.join_timeout_ms
                                                                    : std::max<int64_t>(a.timeout_ms, 20000));
  return o;
}

void small_all_reduce_check(Communicator& c) {
  std::vector<int32_t> v(1000, c.rank() + 1);
  c.all_reduce(v.data(), v.data(), v.size(), DataType::Int32, RedOp::Sum);
  const int n = c.world_size();
  for (int32_t x : v)
    if (x != n * (n + 1) / 2) throw Failure("rank " + std::to_string(c.rank()) + ": all_reduce after the test is wrong");
}

// Loops all_reduce until the expected RemoteError arrives. Returns the exit code.
// `a2a`: loops on all_to_all instead (point-to-point messages to every rank).
int loop_until_remote_error(Communicator& c, int culprit, const std::string& tag, bool a2a = false) {
  std::vector<float> v(4099 * c.world_size(), 1.0f), out(v.size());
  bool announced = false;
  try {
    for (;;) {
      if (a2a) c.all_to_all(v.data(), out.data(), 4099, DataType::Float32);
      else c.all_reduce(v.data(), v.data(), 4099, DataType::Float32, RedOp::Sum);
      std::fill(v.begin(), v.end(), 1.0f);
      if (!announced) {
        std::cout << "LOOPING" << std::endl;
        announced = true;
      }
    }
  } catch (const RemoteError& e) {
    std::cerr << tag << " got RemoteError culprit=" << e.culprit() << ": " << e.what() << std::endl;
    if (e.culprit() == culprit) return 0;
    // Across nodes the first rank whose TCP rail to the dead rank broke aborts the group, and
    // its abort can reach the others before the root's news of the death: the error then comes
    // from that rank, with the lost connection to the culprit as its cause.
    const std::string lost = "connection with rank " + std::to_string(culprit) + " ";
    return std::string(e.what()).find(lost) != std::string::npos ? 0 : 3;
  } catch (const TimeoutError& e) {
    // A stalled (not dead) peer: the first rank to time out names it; the others then get the
    // RemoteError above through the shared abort word, or time out themselves.
    std::cerr << tag << " got TimeoutError: " << e.what() << std::endl;
    const std::string want = "rank(s) " + std::to_string(culprit);
    return std::string(e.what()).find(want) != std::string::npos ? 0 : 3;
  }
}

// ---------------------------------------------------------------------------------------
// Fault injection.

// The fault happens here and now, in this thread. "exit" is a process exit without closing
// the communicator (its clean leave, in the between_calls phase, is the caller's return).
[[noreturn]] void inject(const std::string& kind) {
  std::cout << "FAULT" << std::endl;
  if (kind == "kill") ::raise(SIGKILL);
  if (kind == "stop") {
    ::raise(SIGSTOP);  // the driver SIGKILLs it once the others have reported
    ::pause();
  }
  if (kind == "throw") std::thread([] { throw std::runtime_error("injected uncaught exception"); }).join();
  std::exit(0);
}

// True when `text` names rank `r`: "rank 3", "rank(s) 3", "ranks 0, 3 of 4" ...
bool names_rank(const std::string& text, int r) {
  bool listing = false;
  std::string tok;
  auto flush = [&]() {
    if (tok.empty()) return false;
    bool hit = false;
    if (tok.rfind("rank", 0) == 0) listing = true;
    else if (std::all_of(tok.begin(), tok.end(), ::isdigit)) hit = listing && std::stoi(tok) == r;
    else if (tok != "s") listing = false;
    tok.clear();
    return hit;
  };
  for (char ch : text + " ") {
    if (std::isalnum(static_cast<unsigned char>(ch))) tok.push_back(ch);
    else if (flush()) return true;
  }
  return false;
}

std::unique_ptr<Communicator> make_comm(const Args& a) {
  if (a.port > 0) return Communicator::from_address("127.0.0.1", static_cast<uint16_t>(a.port), a.rank, a.world, options_for(a));
  return std::make_unique<Communicator>(UniqueId::parse(a.id), a.rank, a.world, options_for(a));
}

// Both sides of a fault run. Returns the exit code (survivors: 0 when the error names it).
int fault_run(const Args& a) {
  const std::string tag = "rank " + std::to_string(a.rank);
  const bool culprit = a.rank == a.culprit;
  if (culprit && a.phase == "before_join") inject(a.fault);
  std::thread timer;
  if (culprit && (a.phase == "during_join" || a.phase == "large_call"))
    timer = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(a.hold_ms));
      inject(a.fault);
    });
  const auto t0 = std::chrono::steady_clock::now();
  try {
    auto c = make_comm(a);
    std::cout << "JOINED" << std::endl;
    const size_t n = a.phase == "large_call" ? (size_t{8} << 20) / 4 : 1024;  // 8 MiB: many rounds
    std::vector<float> v(n, 1.0f);
    for (int i = 0;; ++i) {
      if (culprit && a.phase == "between_calls" && i == 20) {
        if (a.fault == "exit") {
          std::cout << "FAULT" << std::endl;
          return 0;  // closes the communicator: a clean leave
        }
        inject(a.fault);
      }
      c->all_reduce(v.data(), v.data(), v.size(), DataType::Float32, RedOp::Sum);
      std::fill(v.begin(), v.end(), 1.0f);
      if (i == 0) std::cout << "LOOPING" << std::endl;
      if (culprit && a.phase == "between_calls") std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  } catch (const Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << tag << " got " << to_string(e.code()) << " after " << s << " s: " << e.what() << std::endl;
    if (culprit) return 3;
    return names_rank(e.what(), a.culprit) ? 0 : 3;
  }
}

// Point-to-point calls that disagree across ranks (--expect says how): every rank must fail
// with an error (printed to stderr for the driver to check) within the timeout.
//   count: rank 0 sends 100 float32 to rank 1, which receives 50
//   dtype: rank 0 sends 100 float32 to rank 1, which receives 100 int32
//   peer:  world 3, a cycle of waits: 0 sends to 1, 1 receives from 2, 2 receives from 0
//   a2av:  all_to_all_v where rank 0 expects one element fewer from rank 2 than rank 2 sends
int p2p_mismatch(Communicator& c, const Args& a, const std::string& tag) {
  std::vector<float> f(100, 1.0f);
  std::vector<int32_t> i32(100, 0);
  const int me = c.rank(), n = c.world_size();
  try {
    if (a.expect == "count" || a.expect == "dtype") {
      if (me == 0) c.send(f.data(), 100, DataType::Float32, 1);
      else if (me == 1 && a.expect == "count") c.recv(f.data(), 50, DataType::Float32, 0);
      else if (me == 1) c.recv(i32.data(), 100, DataType::Int32, 0);
      else c.barrier();
    } else if (a.expect == "peer") {
      if (me == 0) c.send(f.data(), 100, DataType::Float32, 1);
      else if (me == 1) c.recv(f.data(), 100, DataType::Float32, 2);
      else c.recv(f.data(), 100, DataType::Float32, 0);
    } else if (a.expect == "a2av") {
      std::vector<size_t> sc(n, 3), rc(n, 3);
      if (me == 2) sc[0] = 5;
      if (me == 0) rc[2] = 4;
      std::vector<float> in(3 * n + 2), out(3 * n + 2);
      c.all_to_all_v(in.data(), sc, out.data(), rc, DataType::Float32);
    }
  } catch (const Error& e) {
    std::cerr << tag << " failed as expected (" << to_string(e.code()) << "): " << e.what() << std::endl;
    // The group is poisoned: a later call fails at once instead of hanging.
    try {
      c.barrier();
    } catch (const Error& later) {
      std::cerr << tag << " later call: " << later.what() << std::endl;
      return 0;
    }
    std::cerr << tag << " a later call succeeded on a poisoned group" << std::endl;
    return 3;
  }
  // A rank whose own transfers matched may finish; the group must still be poisoned for it.
  try {
    c.barrier();
  } catch (const Error& later) {
    std::cerr << tag << " completed its own matching transfers; later call: " << later.what() << std::endl;
    return 0;
  }
  std::cerr << tag << " completed although the calls disagree, and the group still works" << std::endl;
  return 3;
}

int run(const Args& a) {
  if (a.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.delay_ms));
  if (a.mode == "fault") return fault_run(a);
  const UniqueId id = UniqueId::parse(a.id);
  const std::string tag = "rank " + std::to_string(a.rank);

  if (a.mode == "join_error") {
    try {
      Communicator c(id, a.rank, a.world, options_for(a));
    } catch (const Error& e) {
      std::cerr << tag << " join failed as expected (" << to_string(e.code()) << "): " << e.what() << std::endl;
      const ErrorCode want = a.expect == "unsupported" ? ErrorCode::Unsupported : ErrorCode::InvalidArgument;
      return e.code() == want ? 0 : 3;
    }
    std::cerr << tag << " joined although it should have been rejected" << std::endl;
    return 3;
  }

  Communicator c(id, a.rank, a.world, options_for(a));
  std::cout << "JOINED" << std::endl;

  if (a.mode == "matrix") {
    const uint64_t seed = agree_seed(c, a.seed);
    const auto t0 = std::chrono::steady_clock::now();
    Matrix(c, a, seed).run_all();
    std::cerr << tag << " matrix passed in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s (seed " << seed << ")"
              << std::endl;
    return 0;
  }
  if (a.mode == "p2p") {
    const uint64_t seed = agree_seed(c, a.seed);
    const auto t0 = std::chrono::steady_clock::now();
    Matrix(c, a, seed).run_p2p();
    small_all_reduce_check(c);  // the slots and channels do not disturb each other
    std::cerr << tag << " p2p matrix passed in "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s (seed " << seed << ")"
              << std::endl;
    return 0;
  }
  if (a.mode == "p2p_mismatch") return p2p_mismatch(c, a, tag);
  if (a.mode == "bench") {  // latency/bandwidth probe, not a test: prints one line per size
    for (size_t bytes : {size_t{4}, size_t{4096}, size_t{65536}, size_t{1} << 20, size_t{16} << 20}) {
      std::vector<float> v(bytes / 4, 1.0f);
      const int iters = bytes <= 65536 ? 2000 : 20;
      c.all_reduce(v.data(), v.data(), v.size(), DataType::Float32, RedOp::Sum);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) c.all_reduce(v.data(), v.data(), v.size(), DataType::Float32, RedOp::Sum);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
      if (a.rank == 0) std::cerr << "all_reduce " << bytes << " B: " << us << " us, " << bytes / us / 1e3 << " GB/s" << std::endl;
    }
    return 0;
  }
  if (a.mode == "loop") return loop_until_remote_error(c, a.culprit, tag);
  if (a.mode == "loop_a2a") return loop_until_remote_error(c, a.culprit, tag, true);
  if (a.mode == "abort") {
    std::vector<float> v(100, 1.0f);
    for (int i = 0; i < 5; ++i) c.all_reduce(v.data(), v.data(), v.size(), DataType::Float32, RedOp::Sum);
    if (a.rank == a.culprit) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the others block in a call
      c.abort("test abort");
      return 0;
    }
    return loop_until_remote_error(c, a.culprit, tag);
  }
  if (a.mode == "hold") {
    std::this_thread::sleep_for(std::chrono::milliseconds(a.hold_ms));
    small_all_reduce_check(c);
    return 0;
  }
  if (a.mode == "badargs") {
    int expected_errors = 0;
    auto expect_invalid = [&](const char* what, auto&& fn) {
      try {
        fn();
        std::cerr << tag << ": " << what << " was accepted" << std::endl;
      } catch (const InvalidArgument& e) {
        ++expected_errors;
        std::cerr << tag << ": " << what << " -> " << e.what() << std::endl;
      }
    };
    std::vector<float> v(16, 1.0f);
    expect_invalid("null send", [&] { c.all_reduce(nullptr, v.data(), v.size(), DataType::Float32, RedOp::Sum); });
    expect_invalid("null recv", [&] { c.all_gather(v.data(), nullptr, 4, DataType::Float32); });
    expect_invalid("root out of range", [&] { c.broadcast(v.data(), v.data(), v.size(), DataType::Float32, a.world); });
    expect_invalid("negative root", [&] { c.broadcast(v.data(), v.data(), v.size(), DataType::Float32, -1); });
    small_all_reduce_check(c);
    return expected_errors == 4 ? 0 : 3;
  }
  std::cerr << "unknown mode " << a.mode << std::endl;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    return run(a);
  } catch (const Failure& f) {
    std::cerr << "FAIL " << f.what() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "rank " << a.rank << " unexpected exception: " << e.what() << std::endl;
    return 2;
  }
}
