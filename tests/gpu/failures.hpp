// Refusals, aborts and timeouts (failures.cu): each must raise the documented error on the
// ranks concerned, naming the cause, within its time; nothing may hang.
#pragma once
#include "worker.hpp"

namespace gw {

// Host memory or a null pointer refused before any kernel runs, naming the buffer; the refusal
// aborts the group, so a later call raises naming the refusing rank. Last on its communicator.
void test_bad_buffers(Communicator& c);
// Rank 1 passes an unregistered output where rank 0 uses the registered one: InvalidArgument
// on both ranks.
void test_registration_mismatch();
// Without ACTORCC_CUDA_SHARE_GPU, ranks sharing a GPU are refused with an error that says so.
void refused_without_share_setting();
// (2+ ranks) abort: rank 1 aborts while rank 0's kernel waits for it (RemoteError naming rank
// 1); timeout: rank 1 never joins a call (TimeoutError naming rank 1).
void abort_and_timeout_tests();

}  // namespace gw
