// The collective matrix of mp_worker (mode matrix): all_reduce, reduce_scatter, all_gather and
// broadcast over every dtype x op x count, in and out of place, aligned and misaligned.
#include "matrix.hpp"

#include <algorithm>
#include <sstream>

namespace mpw {

using testref::kPoison;
using testref::Values;

void Matrix::run_all() {
  const size_t biggest = *std::max_element(a_.counts.begin(), a_.counts.end());
  for (size_t count : a_.counts) {
    const bool thin = a_.big_subset && count == biggest && count > 4097;
    for (bool in_place : {false, true}) {
      for (DataType t : kDtypes) {
        for (RedOp op : kOps) {
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

std::string Matrix::where(const char* coll, DataType t, RedOp op, size_t count, bool in_place, size_t off) const {
  std::ostringstream os;
  os << "rank " << me_ << " " << coll << " " << to_string(t) << " " << to_string(op) << " count=" << count
     << (in_place ? " in-place" : " out-of-place") << (off ? " misaligned" : "") << " case=" << case_
     << " seed=" << seed_;
  return os.str();
}

Matrix::Table Matrix::input_table(int rank, size_t m, DataType t, RedOp op) const {
  return {m, testref::input_bytes(Values::Exact, stream(rank), 0, m, t, op, n_)};
}

Matrix::Table Matrix::reduced_table(size_t m, DataType t, RedOp op) const {
  std::vector<uint64_t> ss(n_);
  for (int r = 0; r < n_; ++r) ss[r] = stream(r);
  return {m, testref::reduced_bytes(Values::Exact, ss, 0, m, t, op)};
}

void Matrix::fill(void* buf, size_t n, size_t j0, const Table& tb, size_t es) {
  for (size_t i = 0; i < n;) {
    const size_t k = (j0 + i) % tb.m, len = std::min(n - i, tb.m - k);
    std::memcpy(static_cast<uint8_t*>(buf) + i * es, tb.bytes.data() + k * es, len * es);
    i += len;
  }
}

void Matrix::check(const void* buf, size_t n, size_t j0, const Table& tb, DataType t, const std::string& w) const {
  const size_t es = dtype_size(t);
  for (size_t i = 0; i < n;) {
    const size_t k0 = (j0 + i) % tb.m, len = std::min(n - i, tb.m - k0);
    const auto* got = static_cast<const uint8_t*>(buf) + i * es;
    const size_t q = testref::first_difference(got, tb.bytes.data() + k0 * es, len, t);
    if (q < len) {
      std::ostringstream os;
      os << w << ": element " << i + q << " is " << testref::load(got, q, t) << ", expected "
         << testref::load(tb.bytes.data(), k0 + q, t);
      throw Failure(os.str());
    }
    i += len;
  }
}

void Matrix::check_guard(const std::vector<uint8_t>& buf, size_t used, const std::string& w) const {
  for (size_t i = used; i < buf.size(); ++i)
    if (buf[i] != kPoison) throw Failure(w + ": wrote past the end of the output (byte " + std::to_string(i) + ")");
}

void Matrix::check_guard(const Buf& b, size_t used, const std::string& w) const {
  if (testref::first_unpoisoned(b.all.data(), b.lead) < b.lead) throw Failure(w + ": wrote before the start of the output");
  for (size_t i = b.lead + used; i < b.all.size(); ++i)
    if (b.all[i] != kPoison)
      throw Failure(w + ": wrote past the end of the output (byte " + std::to_string(i - b.lead) + ")");
}

void Matrix::all_reduce(DataType t, RedOp op, size_t count, bool in_place) {
  ++case_;
  const size_t es = dtype_size(t), m = std::min(count, kPeriod), off = misalignment();
  const std::string w = where("all_reduce", t, op, count, in_place, off);
  record("all_reduce", t, std::string(to_string(op)), count * es);
  Buf send(count, es, testref::input_offset(off)), recv(count, es, testref::output_offset(off));
  if (count) fill(send.data(), count, 0, input_table(me_, m, t, op), es);
  Buf& out = in_place ? send : recv;
  c_.all_reduce(send.data(), out.data(), count, t, op);
  if (count) check(out.data(), count, 0, reduced_table(m, t, op), t, w);
  check_guard(out, count * es, w);
}

void Matrix::reduce_scatter(DataType t, RedOp op, size_t count, bool in_place) {
  ++case_;
  const size_t es = dtype_size(t), total = count * n_, m = std::min(total, kPeriod), off = misalignment();
  const std::string w = where("reduce_scatter", t, op, count, in_place, off);
  record("reduce_scatter", t, std::string(to_string(op)), total * es);
  Buf send(total, es, testref::input_offset(off)), recv(count, es, testref::output_offset(off));
  if (count) fill(send.data(), total, 0, input_table(me_, m, t, op), es);
  uint8_t* out = in_place ? send.data() + me_ * count * es : recv.data();
  c_.reduce_scatter(send.data(), out, count, t, op);
  if (count) check(out, count, me_ * count, reduced_table(m, t, op), t, w);
  if (in_place) check_guard(send, total * es, w);
  else check_guard(recv, count * es, w);
}

void Matrix::all_gather(DataType t, size_t count, bool in_place) {
  ++case_;
  const size_t es = dtype_size(t), total = count * n_, m = std::min(count, kPeriod), off = misalignment();
  const std::string w = where("all_gather", t, RedOp::Sum, count, in_place, off);
  record("all_gather", t, "-", total * es);
  Buf recv(total, es, testref::output_offset(off)), send(count, es, testref::input_offset(off));
  uint8_t* in = in_place ? recv.data() + me_ * count * es : send.data();
  if (count) fill(in, count, 0, input_table(me_, m, t, RedOp::Sum), es);
  c_.all_gather(in, recv.data(), count, t);
  for (int r = 0; r < n_ && count; ++r)
    check(recv.data() + r * count * es, count, 0, input_table(r, m, t, RedOp::Sum), t,
          w + " (block of rank " + std::to_string(r) + ")");
  check_guard(recv, total * es, w);
}

void Matrix::broadcast(DataType t, size_t count, bool in_place) {
  ++case_;
  const int root = static_cast<int>(case_ % static_cast<uint64_t>(n_));
  const size_t es = dtype_size(t), m = std::min(count, kPeriod), off = misalignment();
  const std::string w = where("broadcast", t, RedOp::Sum, count, in_place, off) + " root=" + std::to_string(root);
  record("broadcast", t, "-", count * es);
  Buf send(count, es, testref::input_offset(off)), recv(count, es, testref::output_offset(off));
  if (count && me_ == root) fill(send.data(), count, 0, input_table(root, m, t, RedOp::Sum), es);
  Buf& out = in_place ? send : recv;
  c_.broadcast(send.data(), out.data(), count, t, root);
  if (count) check(out.data(), count, 0, input_table(root, m, t, RedOp::Sum), t, w);
  check_guard(out, count * es, w);
}

}  // namespace mpw
