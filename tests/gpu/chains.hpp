// CUDA graphs and back-to-back eager rounds (chains.cu): chains of in += 1; out = all_reduce(in);
// acc += out, whose accumulated result is exact, so every replay / round is checked; and eager
// calls on a stream each.
#pragma once
#include "worker.hpp"

namespace gw {

// A graph of 4 int64 + 2 int32 all-reduce chains, an all_gather and a barrier, replayed `replays` times.
void test_graph(Communicator& c, long replays);
// `calls` rounds of the chains, eager. `register_some`: the outputs of chains 1 and 3 are
// registered, so registered (direct) and workspace calls of the pipelined two-shot alternate.
void test_back_to_back(Communicator& c, long calls, bool register_some = false);
// `calls` all-reduces, each on a stream of its own that is destroyed right after the call
// (kernels still in flight), the caller ordering nothing: the library orders its calls itself
// and never touches a destroyed stream. Each call has its own buffers; all are checked at the end.
void test_stream_per_call(Communicator& c, long calls);

}  // namespace gw
