// One checked call per collective (cases.cu). Every case: fresh inputs from its seed (the
// shared reference's Rounding family), the output poisoned with guard bytes around it, the
// result compared bitwise with the host reference, and the hash agreement of check_hashes
// across ranks. `mis` (0..15): input and output misaligned by testref::input_offset(mis) and
// testref::output_offset(mis) elements (0: aligned). Each counts one case (CaseScope).
#pragma once
#include <string>

#include "worker.hpp"

namespace gw {

void test_allreduce(Communicator& c, const std::string& cname, DataType t, RedOp op, size_t count, bool inplace, int mis,
                    uint64_t seed);
void test_reduce_scatter(Communicator& c, DataType t, RedOp op, size_t n, bool inplace, uint64_t seed, int mis = 0);
void test_all_gather(Communicator& c, DataType t, size_t n, bool inplace, int mis, uint64_t seed);
void test_broadcast(Communicator& c, DataType t, size_t n, int root, bool inplace, uint64_t seed, int mis = 0);
// A call the group refuses before any work (UnsupportedError on this rank, as on every rank),
// after which the group still serves calls: `coll` is all_reduce or reduce_scatter.
void test_refused(Communicator& c, Collective coll, DataType t, RedOp op, size_t n);
// Whether the group's ranks lie on more than one node (the hierarchical GPU backend serves it).
bool spans_nodes(const Communicator& c);

// A misalignment for case `seed` (1..15), so a sweep's misaligned cases cycle through them all.
inline int mis_of(uint64_t seed) { return 1 + int(seed % 15); }

}  // namespace gw
