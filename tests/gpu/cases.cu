// One checked call per collective: see cases.hpp.
#include "cases.hpp"

#include <sstream>
#include <vector>

namespace gw {
namespace {

using testref::Values;

std::string desc(const char* coll, const std::string& comm, DataType t, RedOp op, size_t count, bool inplace, int mis,
                 uint64_t seed) {
  std::ostringstream os;
  os << coll << "[" << comm << "] " << to_string(t) << " " << to_string(op) << " n=" << count << (inplace ? " inplace" : "")
     << (mis ? " misaligned " + std::to_string(mis) : "") << " seed " << seed;
  return os.str();
}

uint64_t stream(uint64_t seed, int rank) { return testref::stream_of(seed, rank, 0); }
std::vector<uint64_t> streams(uint64_t seed) {
  std::vector<uint64_t> s(g_world);
  for (int k = 0; k < g_world; ++k) s[k] = stream(seed, k);
  return s;
}

// Fills [0, bytes) of d_b with poison (the output, its lead and its guard).
void poison_output(size_t bytes) { CK(cudaMemsetAsync(d_b, testref::kPoison, bytes, g_stream)); }

// Copies d_b's [0, lead + used + kGuard) back, checks the poison before `lead` and after
// lead + used, and returns the copy.
std::vector<uint8_t> fetch_output(size_t lead, size_t used, const std::string& what) {
  std::vector<uint8_t> h(lead + used + kGuard);
  CK(cudaMemcpy(h.data(), d_b, h.size(), cudaMemcpyDeviceToHost));
  if (testref::first_unpoisoned(h.data(), lead) < lead) fail(what + ": wrote before the start");
  if (testref::first_unpoisoned(h.data() + lead + used, kGuard) < kGuard) fail(what + ": wrote past the end");
  return h;
}

// Fails with the first differing element of got (count elements) against want.
bool compare(const uint8_t* got, const std::vector<uint8_t>& want, size_t count, DataType t, const std::string& what,
             size_t index_base = 0) {
  const size_t i = testref::first_difference(got, want.data(), count, t);
  if (i == count) return true;
  std::ostringstream os;
  os.precision(17);
  os << what << ": [" << index_base + i << "] got " << testref::load(got, i, t) << " want " << testref::load(want.data(), i, t);
  fail(os.str());
  return false;
}

template <typename F>
bool call_or_fail(const std::string& what, F&& call) {
  try {
    call();
  } catch (const std::exception& e) {
    fail(what + ": threw " + e.what());
    return false;
  }
  sync_or_fail(what);
  return true;
}

// The input family of a reduction. Across nodes a half-precision sum is rounded at each level
// (the node's shard, then NCCL's rail reduction in the element type), not once after an fp32
// accumulation as on the NVLink kernels, so there the Exact family (sums exact in every type)
// is checked bitwise; Rounding, which shows the fp32 accumulation, stays for one node.
Values reduction_values(const Communicator& c, DataType t) {
  return (t == DataType::Float16 || t == DataType::BFloat16) && spans_nodes(c) ? Values::Exact : Values::Rounding;
}

}  // namespace

void test_allreduce(Communicator& c, const std::string& cname, DataType t, RedOp op, size_t count, bool inplace, int mis,
                    uint64_t seed) {
  if (sampled_out()) return;
  const size_t es = dtype_size(t), bytes = count * es;
  const CaseScope cs("all_reduce", t, std::string(to_string(op)), bytes);
  const size_t out_off = testref::output_offset(mis) * es, in_off = inplace ? out_off : testref::input_offset(mis) * es;
  const std::string what = desc("all_reduce", cname, t, op, count, inplace, mis, seed);
  const Values vals = reduction_values(c, t);
  const auto hin = testref::input_bytes(vals, stream(seed, g_rank), 0, count, t, op, g_world);
  char* in = (inplace ? d_b : d_a) + in_off;
  char* out = d_b + out_off;
  poison_output(out_off + bytes + kGuard);
  CK(cudaMemcpyAsync(in, hin.data(), bytes, cudaMemcpyHostToDevice, g_stream));
  if (!call_or_fail(what, [&] { c.all_reduce(in, out, count, t, op, g_stream); })) return;
  const auto h = fetch_output(out_off, bytes, what);
  const auto want = testref::reduced_bytes(vals, streams(seed), 0, count, t, op);
  compare(h.data() + out_off, want, count, t, what);
  check_hashes(c, what, h.data() + out_off, want.data(), bytes, true);
}

void test_refused(Communicator& c, Collective coll, DataType t, RedOp op, size_t n) {
  if (sampled_out()) return;
  const size_t total = coll == Collective::ReduceScatter ? n * g_world : n;
  const bool rs = coll == Collective::ReduceScatter;
  const CaseScope cs(rs ? "reduce_scatter_refused" : "all_reduce_refused", t, std::string(to_string(op)),
                     total * dtype_size(t));
  const std::string what = desc(rs ? "reduce_scatter" : "all_reduce", "refused", t, op, n, false, 0, 0);
  try {
    if (coll == Collective::ReduceScatter) c.reduce_scatter(d_a, d_b, n, t, op, g_stream);
    else c.all_reduce(d_a, d_b, n, t, op, g_stream);
    sync_or_fail(what);
    fail(what + ": ran instead of being refused");
  } catch (const UnsupportedError& e) {
    if (std::string(e.what()).find("rank " + std::to_string(g_rank)) == std::string::npos)
      fail(what + ": the refusal does not name this rank: " + e.what());
  } catch (const std::exception& e) {
    fail(what + ": threw other than UnsupportedError: " + e.what());
  }
}

bool spans_nodes(const Communicator& c) {
  for (const auto& p : c.peers())
    if (p.node != c.peers().front().node) return true;
  return false;
}

void test_reduce_scatter(Communicator& c, DataType t, RedOp op, size_t n, bool inplace, uint64_t seed, int mis) {
  if (sampled_out()) return;
  const size_t es = dtype_size(t), total = n * g_world;
  const CaseScope cs("reduce_scatter", t, std::string(to_string(op)), total * es);
  const size_t out_off = testref::output_offset(mis) * es, in_off = testref::input_offset(mis) * es;
  const std::string what = desc("reduce_scatter", "auto", t, op, n, inplace, mis, seed);
  const Values vals = reduction_values(c, t);
  const auto hin = testref::input_bytes(vals, stream(seed, g_rank), 0, total, t, op, g_world);
  // In place: the input is d_b's whole buffer, the output this rank's shard of it.
  char* send = inplace ? d_b + out_off : d_a + in_off;
  char* recv = inplace ? send + g_rank * n * es : d_b + out_off;
  poison_output(out_off + total * es + kGuard);
  CK(cudaMemcpyAsync(send, hin.data(), total * es, cudaMemcpyHostToDevice, g_stream));
  if (!call_or_fail(what, [&] { c.reduce_scatter(send, recv, n, t, op, g_stream); })) return;
  const size_t shard = (recv - d_b);  // where this rank's output starts in d_b
  // Out of place, nothing after the shard may change; in place, nothing after the whole buffer.
  const auto h = fetch_output(out_off, inplace ? total * es : n * es, what);
  const auto want = testref::reduced_bytes(vals, streams(seed), g_rank * n, n, t, op);
  compare(h.data() + shard, want, n, t, what, g_rank * n);
  check_hashes(c, what, h.data() + shard, want.data(), n * es, false);
}

void test_all_gather(Communicator& c, DataType t, size_t n, bool inplace, int mis, uint64_t seed) {
  if (sampled_out()) return;
  const size_t es = dtype_size(t), total = n * g_world;
  const CaseScope cs("all_gather", t, "-", total * es);
  const size_t out_off = testref::output_offset(mis) * es, in_off = testref::input_offset(mis) * es;
  const std::string what = desc("all_gather", "auto", t, RedOp::Sum, n, inplace, mis, seed);
  const auto hin = testref::input_bytes(Values::Rounding, stream(seed, g_rank), 0, n, t, RedOp::Sum, g_world);
  char* recv = d_b + out_off;
  char* send = inplace ? recv + g_rank * n * es : d_a + in_off;
  poison_output(out_off + total * es + kGuard);
  CK(cudaMemcpyAsync(send, hin.data(), n * es, cudaMemcpyHostToDevice, g_stream));
  if (!call_or_fail(what, [&] { c.all_gather(send, recv, n, t, g_stream); })) return;
  const auto h = fetch_output(out_off, total * es, what);
  std::vector<uint8_t> want;
  want.reserve(total * es);
  for (int k = 0; k < g_world; ++k) {
    const auto block = testref::input_bytes(Values::Rounding, stream(seed, k), 0, n, t, RedOp::Sum, g_world);
    want.insert(want.end(), block.begin(), block.end());
  }
  compare(h.data() + out_off, want, total, t, what);
  check_hashes(c, what, h.data() + out_off, want.data(), total * es, true);
}

void test_broadcast(Communicator& c, DataType t, size_t n, int root, bool inplace, uint64_t seed, int mis) {
  if (sampled_out()) return;
  const size_t es = dtype_size(t);
  const CaseScope cs("broadcast", t, "-", n * es);
  const size_t out_off = testref::output_offset(mis) * es, in_off = testref::input_offset(mis) * es;
  const std::string what = desc("broadcast", "root" + std::to_string(root), t, RedOp::Sum, n, inplace, mis, seed);
  const auto hin = testref::input_bytes(Values::Rounding, stream(seed, root), 0, n, t, RedOp::Sum, g_world);
  char* out = d_b + out_off;
  char* send = inplace ? out : d_a + in_off;
  poison_output(out_off + n * es + kGuard);
  if (g_rank == root) CK(cudaMemcpyAsync(send, hin.data(), n * es, cudaMemcpyHostToDevice, g_stream));
  if (!call_or_fail(what, [&] { c.broadcast(send, out, n, t, root, g_stream); })) return;
  const auto h = fetch_output(out_off, n * es, what);
  compare(h.data() + out_off, hin, n, t, what);
  check_hashes(c, what, h.data() + out_off, hin.data(), n * es, true);
}

}  // namespace gw
