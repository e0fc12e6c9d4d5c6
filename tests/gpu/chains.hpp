// CUDA graphs and back-to-back eager rounds (chains.cu): chains of in += 1; out = all_reduce(in);
// acc += out, whose accumulated result is exact, so every replay / round is checked.
#pragma once
#include "worker.hpp"

namespace gw {

// A graph of 4 int64 + 2 int32 all-reduce chains, an all_gather and a barrier, replayed `replays` times.
void test_graph(Communicator& c, long replays);
// `calls` rounds of the chains, eager. `register_some`: the outputs of chains 1 and 3 are
// registered, so registered (direct) and workspace calls of the pipelined two-shot alternate.
void test_back_to_back(Communicator& c, long calls, bool register_some = false);

}  // namespace gw
