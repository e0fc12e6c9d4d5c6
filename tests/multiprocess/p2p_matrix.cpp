// The point-to-point matrix of mp_worker (mode p2p): batches, blocking send/recv, all_to_all(_v),
// gather, scatter and reduce over every dtype x count (reduce: every op), each case counted
// (tests/common/tally.hpp; "-" as the op of the calls that do not reduce).
#include "matrix.hpp"

namespace mpw {

void Matrix::run_p2p() {
  for (size_t count : a_.counts) {
    for (DataType t : kDtypes) {
      ring_batch(t, count);
      pairs(t, count);
      all_to_all(t, count);
      all_to_all_v(t, count);
      gather(t, count, false);
      gather(t, count, true);
      scatter(t, count, false);
      scatter(t, count, true);
      for (RedOp op : kOps) reduce(t, op, count);
    }
    c_.barrier();
  }
}

// One batch: a message to every other rank at distance k (a ring per k, all at once), two
// messages of different sizes to the right neighbour (order on one channel), and a copy to
// itself. Everything that would deadlock as separate blocking calls.
void Matrix::ring_batch(DataType t, size_t count) {
  ++case_;
  const size_t es = dtype_size(t), m = std::min(std::max<size_t>(count, 1), kPeriod);
  const std::string w = where("send_recv batch", t, RedOp::Sum, count, false);
  record("send_recv", t, "-", count * es);
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<P2POp> ops;
  struct Want { size_t buf; int from; int tag; size_t n; };
  std::vector<Want> wants;
  const Table mine = msg_table(me_, m, t);
  auto add_send = [&](int to, int tag, size_t n) {
    bufs.emplace_back(n * es + kGuard, testref::kPoison);
    if (n) fill(bufs.back().data(), n, shift(to, tag), mine, es);
    ops.push_back({P2POp::Kind::Send, bufs.back().data(), n, t, to});
  };
  auto add_recv = [&](int from, int tag, size_t n) {
    bufs.emplace_back(n * es + kGuard, testref::kPoison);
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
void Matrix::pairs(DataType t, size_t count) {
  ++case_;
  const size_t es = dtype_size(t), m = std::min(std::max<size_t>(count, 1), kPeriod);
  const std::string w = where("send/recv", t, RedOp::Sum, count, false);
  const int partner = me_ ^ 1;
  if (partner >= n_) return;
  record("send/recv", t, "-", count * es);
  std::vector<uint8_t> out(count * es + kGuard, testref::kPoison), in(count * es + kGuard, testref::kPoison);
  if (count) fill(out.data(), count, shift(partner, 1), msg_table(me_, m, t), es);
  for (int leg = 0; leg < 2; ++leg) {
    const bool sender = (me_ % 2) == leg;
    if (sender) c_.send(out.data(), count, t, partner);
    else c_.recv(in.data(), count, t, partner);
  }
  if (count) check(in.data(), count, shift(me_, 1), msg_table(partner, m, t), t, w);
  check_guard(in, count * es, w);
}

void Matrix::all_to_all(DataType t, size_t count) {
  ++case_;
  const size_t es = dtype_size(t), total = count * n_, m = std::min(std::max<size_t>(total, 1), kPeriod);
  const std::string w = where("all_to_all", t, RedOp::Sum, count, false);
  record("all_to_all", t, "-", total * es);
  std::vector<uint8_t> send(total * es + kGuard, testref::kPoison), recv(total * es + kGuard, testref::kPoison);
  if (total) fill(send.data(), total, 0, msg_table(me_, m, t), es);
  c_.all_to_all(send.data(), recv.data(), count, t);
  // Block r of the output is block `me` of rank r's input.
  for (int r = 0; r < n_ && count; ++r)
    check(recv.data() + r * count * es, count, me_ * count, msg_table(r, m, t), t,
          w + " (block from rank " + std::to_string(r) + ")");
  check_guard(recv, total * es, w);
}

// Rank `from` sends this many elements to rank `to` (0 for some pairs, up to 2 x count).
size_t Matrix::v_count(int from, int to, size_t count) const {
  const uint64_t h = testref::mix(stream(from) ^ testref::mix(static_cast<uint64_t>(to) + 77));
  return h % 5 == 0 ? 0 : h % (2 * count + 2);
}

void Matrix::all_to_all_v(DataType t, size_t count) {
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
  record("all_to_all_v", t, "-", std::max(in_total[me_], out_total) * es);
  auto period = [&](int r) { return std::min(std::max<size_t>(in_total[r], 1), kPeriod); };
  std::vector<uint8_t> send(in_total[me_] * es + kGuard, testref::kPoison), recv(out_total * es + kGuard, testref::kPoison);
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

void Matrix::gather(DataType t, size_t count, bool in_place) {
  ++case_;
  const int root = root_of_case();
  const size_t es = dtype_size(t), total = count * n_, m = std::min(std::max<size_t>(count, 1), kPeriod);
  const std::string w = where("gather", t, RedOp::Sum, count, in_place) + " root=" + std::to_string(root);
  record("gather", t, "-", total * es);
  std::vector<uint8_t> send(count * es + kGuard, testref::kPoison), recv(total * es + kGuard, testref::kPoison);
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

void Matrix::scatter(DataType t, size_t count, bool in_place) {
  ++case_;
  const int root = root_of_case();
  const size_t es = dtype_size(t), total = count * n_, m = std::min(std::max<size_t>(total, 1), kPeriod);
  const std::string w = where("scatter", t, RedOp::Sum, count, in_place) + " root=" + std::to_string(root);
  record("scatter", t, "-", total * es);
  std::vector<uint8_t> send(total * es + kGuard, testref::kPoison), recv(count * es + kGuard, testref::kPoison);
  if (me_ == root && total) fill(send.data(), total, 0, msg_table(root, m, t), es);
  uint8_t* out = in_place && me_ == root ? send.data() + me_ * count * es : recv.data();
  const void* in = me_ == root || case_ % 2 ? send.data() : nullptr;
  c_.scatter(in, out, count, t, root);
  if (count) check(out, count, me_ * count, msg_table(root, m, t), t, w);
  if (me_ == root) check_guard(send, total * es, w);
  if (!(in_place && me_ == root)) check_guard(recv, count * es, w);
}

void Matrix::reduce(DataType t, RedOp op, size_t count) {
  ++case_;
  const int root = root_of_case();
  const size_t es = dtype_size(t), m = std::min(std::max<size_t>(count, 1), kPeriod);
  const bool in_place = case_ % 2 == 0;
  const std::string w = where("reduce", t, op, count, in_place) + " root=" + std::to_string(root);
  record("reduce", t, std::string(to_string(op)), count * es);
  std::vector<uint8_t> send(count * es + kGuard, testref::kPoison), recv(count * es + kGuard, testref::kPoison);
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

}  // namespace mpw
