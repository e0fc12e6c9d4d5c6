// All-reduce on host shared memory, one-shot and two-shot. Both reduce every element over the
// ranks' inputs in rank order (slot 0 first) with the same reduce_n, so all ranks get
// bitwise identical results.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/cpu_algorithms.hpp"
#include "common/mutation.hpp"
#include "reduce/host_reduce.hpp"

namespace actorcc::cpu {
namespace {

// reduce_n, or in the test-only build of this file (common/mutation.hpp) the bug chosen by
// ACTORCC_TEST_MUTATION, so the bench's check can be shown to catch each on the CPU backend.
void fold(void* out, const void* const* ins, int n, size_t count, DataType t, RedOp op) {
  if constexpr (kMutations) {
    static const Mutation m = mutation_from_env();
    const size_t bytes = count * dtype_size(t);
    if (m == kMutDropRank && n > 1) --n;  // the last rank's contribution left out
    if (m == kMutHalfAcc && n > 1 && op == RedOp::Sum && (t == DataType::Float16 || t == DataType::BFloat16)) {
      std::vector<uint8_t> acc(bytes);  // out may alias an input: fold aside, rounding every step
      const void* two[2] = {ins[0], ins[1]};
      reduce_n(acc.data(), two, 2, count, t, op);
      for (int k = 2; k < n; ++k) {
        two[0] = acc.data();
        two[1] = ins[k];
        reduce_n(acc.data(), two, 2, count, t, op);
      }
      std::memcpy(out, acc.data(), bytes);
      return;
    }
    reduce_n(out, ins, n, count, t, op);
    if (m == kMutShiftTile && bytes > 32)  // the first KiB stored one 16-byte word late
      std::memmove(static_cast<uint8_t*>(out) + 16, out, std::min<size_t>(1024, bytes - 16));
    return;
  }
  reduce_n(out, ins, n, count, t, op);
}

}  // namespace

// Reduce (root_local >= 0) is the same rounds with only the root folding; the two-buffer
// argument of shm_group.hpp holds since the root finishes its reads of round k before it
// reaches round k+1's sync point. Same order, so reduce and all_reduce give the same bits.
void all_reduce_oneshot(ShmGroup& g, const CollArgs& a, int root_local) {
  const size_t es = dtype_size(a.dtype);
  const size_t per_round = g.buffer_bytes() / es;
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  std::vector<const void*> ins(g.size());
  for (size_t off = 0; off < a.count; off += per_round) {
    const size_t c = std::min(per_round, a.count - off);
    const uint64_t round = g.next_round();
    std::memcpy(g.buffer(g.me(), round), send + off * es, c * es);
    g.sync(root_local < 0 ? "all_reduce" : "reduce");
    if (root_local >= 0 && g.me() != root_local) continue;
    for (int p = 0; p < g.size(); ++p) ins[p] = g.buffer(p, round);
    // recv may alias send: our input is already in the slot.
    fold(recv + off * es, ins.data(), g.size(), c, a.dtype, a.op);
  }
}

void all_reduce_twoshot(ShmGroup& g, const CollArgs& a) {
  const size_t es = dtype_size(a.dtype);
  const size_t per_round = g.buffer_bytes() / es;
  const int n = g.size();
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  std::vector<const void*> ins(n);
  for (size_t off = 0; off < a.count; off += per_round) {
    const size_t c = std::min(per_round, a.count - off);
    // Slice boundaries depend only on (c, n): the same on every rank.
    auto begin = [&](int r) { return c * static_cast<size_t>(r) / static_cast<size_t>(n); };
    const uint64_t round = g.next_round();
    std::memcpy(g.buffer(g.me(), round), send + off * es, c * es);
    g.sync("all_reduce");
    // Reduce slice `me` over every slot into our own slot's slice (reduce_n allows the output
    // to alias an input). Nobody else reads our slice of any slot before the next sync.
    const size_t b = begin(g.me()), e = begin(g.me() + 1);
    for (int p = 0; p < n; ++p) ins[p] = g.buffer(p, round) + b * es;
    fold(g.buffer(g.me(), round) + b * es, ins.data(), n, e - b, a.dtype, a.op);
    g.sync("all_reduce");
    for (int p = 0; p < n; ++p) {
      const size_t pb = begin(p), pe = begin(p + 1);
      std::memcpy(recv + (off + pb) * es, g.buffer(p, round) + pb * es, (pe - pb) * es);
    }
  }
}

}  // namespace actorcc::cpu
