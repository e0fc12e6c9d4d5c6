// mp_worker's fault and error modes (faults.cpp). Each returns the worker's exit code.
#pragma once
#include <functional>
#include <string>

#include "worker_args.hpp"

namespace mpw {

// Loops all_reduce (`a2a`: all_to_all, point-to-point messages to every rank) until the
// RemoteError (or TimeoutError) naming `culprit` arrives.
int loop_until_remote_error(Communicator& c, int culprit, const std::string& tag, bool a2a = false);
// Both sides of a fault run (--fault at --phase): survivors pass when their error names the culprit.
int fault_run(const Args& a);
// All-reduce until the link between nodes is cut; passes when the error names a far rank.
int link_cut_run(const Args& a);
// One rank's call is refused (--bad); the others must get a RemoteError naming it (bad_call.cpp).
int bad_call(Communicator& c, const Args& a, const std::string& tag);
// The next `at` ("shm_open" | "listen") of this process injects `fault` (once): a fault inside a
// group's setup, which the public API does not expose.
void arm_setup_fault(const std::string& fault, const std::string& at);
// This process's next shm_open of an existing segment (a local rank mapping its group's
// segment) first runs `action` with the segment's name (once).
void arm_before_shm_open(std::function<void(const char*)> action);
// The segment is removed, or swept from another pid namespace, while the group forms
// (--phase removed | pidns_sweep; shm_removal.cpp); sweep_group: a group of one that only sweeps.
int shm_removal_run(const Args& a);
int sweep_group_run(const Args& a);
// Suspend and resume (--phase cycles | again | mixed; suspend.cpp).
int suspend_run(const Args& a);
// Elastic membership scenarios (--phase; elastic.cpp).
int elastic_run(const Args& a);
// True when `text` names rank `r`: "rank 3", "rank(s) 3", "ranks 0, 3 of 4" ...
bool names_rank(const std::string& text, int r);
// Point-to-point calls that disagree across ranks (--expect count | dtype | peer | a2av).
int p2p_mismatch(Communicator& c, const Args& a, const std::string& tag);

}  // namespace mpw
