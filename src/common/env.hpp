// Reading ACTORCC_* settings. The CUDA backend's come from its tables (ACTORCC_CUDA_SETTINGS,
// agreed across ranks, and ACTORCC_CUDA_RANK_SETTINGS, algorithms/cuda/tuning.hpp). The others
// are read here, next to the code that uses them, with a comment `// setting: ACTORCC_X - what it
// does`, so docs/settings.md can be checked by grep. They stay out of those tables because none
// is a CUDA-backend knob and most are needed before a group exists to agree with:
//   common/options.cpp       JOIN_TIMEOUT_S, TIMEOUT_S, BACKEND, ALGO, CHECKED, WORKSPACE_BYTES:
//                            defaults of Options fields (Options is their table; an explicit
//                            field wins), read before the join
//   common/log.cpp           LOG: the process's log level, before anything else runs
//   topology/host_identity   NODE_ID: which node this process is on, an input of the join
//   bootstrap/start_root     SOCKET_ADDR, BOOTSTRAP_SECRET: how this process hosts and keys a root
//   bootstrap/run_id         RUN_ID: the launch a from_address rank belongs to
//   transport/nccl           NCCL_LIB: the library this process loads
//   common/mutation.hpp      TEST_MUTATION: test-only builds
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace actorcc::env {

std::optional<std::string> get(const char* name);
// Parsed values; a malformed value throws InvalidArgument naming the variable.
std::optional<int64_t> get_int(const char* name);
std::optional<double> get_double(const char* name);
std::optional<bool> get_bool(const char* name);  // 1/0, true/false, yes/no, on/off

}  // namespace actorcc::env

