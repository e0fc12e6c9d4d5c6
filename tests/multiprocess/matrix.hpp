// mp_worker's data matrices (mode matrix: matrix.cpp; mode p2p: p2p_matrix.cpp): every call
// checked element by element against the shared reference (tests/common/reference.hpp,
// the order-free "Exact" inputs), outputs poisoned with guard bytes on both sides, half of the
// collective cases with input and output misaligned by 1..15 elements. Rank 0 prints the case
// counts (tests/common/tally.hpp) at the end.
#pragma once
#include <string>
#include <vector>

#include "common/reference.hpp"
#include "common/tally.hpp"
#include "worker_args.hpp"

namespace mpw {

class Matrix {
 public:
  Matrix(Communicator& c, const Args& a, uint64_t seed) : c_(c), a_(a), seed_(seed), me_(c.rank()), n_(c.world_size()) {}

  // all_reduce, reduce_scatter, all_gather, broadcast: every dtype x op x count, in and out of place.
  void run_all();
  // Point-to-point and the collectives built on it (and reduce): every dtype x count; roots,
  // peers and all_to_all_v counts vary with the case number.
  void run_p2p();
  const testref::Tally& tally() const { return tally_; }

 private:
  // Inputs repeat with a prime period (65537) along the element index, so the reference needs
  // at most world x period evaluations per call and the check is a memcmp against a table,
  // while every element is still checked. The period is coprime with every chunk and slice
  // size the backend uses, so a misplaced chunk cannot go unnoticed.
  static constexpr size_t kPeriod = 65537;
  static constexpr size_t kGuard = 64;  // poisoned bytes after every output that must stay untouched

  // Encoded values of one pattern of `m` positions (m <= kPeriod).
  struct Table {
    size_t m = 0;
    std::vector<uint8_t> bytes;
  };
  // A poisoned host buffer of n elements that start `off` elements into it, kGuard bytes after.
  struct Buf {
    std::vector<uint8_t> all;
    size_t lead;
    Buf(size_t n, size_t es, size_t off) : all(off * es + n * es + kGuard, testref::kPoison), lead(off * es) {}
    uint8_t* data() { return all.data() + lead; }
  };

  std::string where(const char* coll, DataType t, RedOp op, size_t count, bool in_place, size_t off = 0) const;
  uint64_t stream(int rank) const { return testref::stream_of(seed_, rank, case_); }
  Table input_table(int rank, size_t m, DataType t, RedOp op) const;
  Table reduced_table(size_t m, DataType t, RedOp op) const;
  // buf[i] = pattern[(j0 + i) % m] for i < n.
  static void fill(void* buf, size_t n, size_t j0, const Table& tb, size_t es);
  // Checks buf[i] against pattern position (j0 + i) % m for i < n, bitwise.
  void check(const void* buf, size_t n, size_t j0, const Table& tb, DataType t, const std::string& w) const;
  // Every byte outside the `used` bytes from the buffer's start must still be poison.
  void check_guard(const std::vector<uint8_t>& buf, size_t used, const std::string& w) const;
  void check_guard(const Buf& b, size_t used, const std::string& w) const;
  // Element offset of this case's input / output: 0 for even cases, 1..15 for odd ones.
  size_t misalignment() const { return case_ % 2 ? 1 + (case_ / 2) % 15 : 0; }
  void record(const char* coll, DataType t, const std::string& op, size_t bytes) {
    tally_.add(coll, t, op, n_, bytes, false);  // a failure throws: the worker exits 1
  }

  void all_reduce(DataType t, RedOp op, size_t count, bool in_place);
  void reduce_scatter(DataType t, RedOp op, size_t count, bool in_place);
  void all_gather(DataType t, size_t count, bool in_place);
  void broadcast(DataType t, size_t count, bool in_place);

  // The message rank `from` sends to rank `to` in case `case_` (tag: which of its messages):
  // pattern of `from` shifted by the destination, so a block delivered to the wrong rank or
  // place cannot match.
  Table msg_table(int from, size_t m, DataType t) const { return input_table(from, m, t, RedOp::Sum); }
  static size_t shift(int to, int tag) { return static_cast<size_t>(to) * 7919 + static_cast<size_t>(tag) * 104729; }
  size_t v_count(int from, int to, size_t count) const;
  int root_of_case() const { return static_cast<int>(testref::mix(case_ + seed_) % static_cast<uint64_t>(n_)); }
  void ring_batch(DataType t, size_t count);
  void pairs(DataType t, size_t count);
  void all_to_all(DataType t, size_t count);
  void all_to_all_v(DataType t, size_t count);
  void gather(DataType t, size_t count, bool in_place);
  void scatter(DataType t, size_t count, bool in_place);
  void reduce(DataType t, RedOp op, size_t count);

  Communicator& c_;
  const Args& a_;
  uint64_t seed_;
  int me_, n_;
  uint64_t case_ = 0;
  testref::Tally tally_;
};

// Every dtype and op the matrices run.
inline constexpr DataType kDtypes[] = {DataType::Float32, DataType::Float16, DataType::BFloat16, DataType::Float64,
                                       DataType::Int8,    DataType::UInt8,   DataType::Int32,    DataType::Int64};
inline constexpr RedOp kOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::Avg};

}  // namespace mpw
