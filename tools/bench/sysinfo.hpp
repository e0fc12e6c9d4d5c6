// Small helpers of the launcher that talk to the system: shell commands, the machine
// description for the JSON, where NCCL is, and the plot.
#pragma once
#include <string>
#include <vector>

#include "cli.hpp"
#include "gpu.hpp"
#include "report.hpp"

namespace actorcc::bench {

std::string trim(std::string s);
std::vector<std::string> split(const std::string& s, char sep);  // trimmed, empty items dropped
// stdout of a shell command ("" when it fails).
std::string capture(const std::string& cmd);
// Runs argv to completion without a shell; returns the exit status or -1. quiet: no output.
int run_command(const std::vector<std::string>& argv, bool quiet = false);
std::string iso_date();  // now, ISO 8601 UTC

// --nccl-lib, else $ACTORCC_NCCL_LIB, else the NCCL of PyTorch's nvidia.nccl package, else
// "libnccl.so.2" (the dynamic loader's search).
std::string resolve_nccl_lib(const Config& c);

// GPUs, driver, CUDA version and `nvidia-smi topo -m` (links = "cpu" without GPUs).
MachineInfo machine_info(const gpu::Probe& probe, bool gpus_used);

// Runs bench/plot.py on the JSON, writing a PNG next to it; prints a note when matplotlib
// is missing. script: --plot, else $ACTORCC_BENCH_PLOT, else the source tree's bench/plot.py.
void write_plot(const std::string& json_path, std::string script);

}  // namespace actorcc::bench
