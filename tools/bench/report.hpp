// Results of a run and their three outputs: the nccl-tests style table (printed row by row as
// workers report them), the comparison with the baselines, and the JSON file (-J). Rank 0's
// worker hands results to the launcher as tab-separated lines in <run-dir>/results.tsv
// (format_* / parse_line below), so the launcher can print rows while the sweep runs.
#pragma once
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.hpp"

namespace actorcc::bench {

struct Row {
  size_t bytes = 0;
  size_t count = 0;
  double time_us = 0;
  double p50_us = 0;
  double p99_us = 0;
  double algbw = 0;  // GB/s
  double busbw = 0;  // GB/s
  size_t wrong = 0;  // wrong elements, summed over ranks
  std::string wrong_ranks;  // "rank:count,..." for ranks with wrong elements ("" = none)
  std::string algo;         // actorcc: the algorithm its planner ran ("" = not known)
};

struct ImplResult {
  std::string impl;        // actorcc | nccl | nccl-symmetric
  double init_ms = -1;     // -1 = not measured
  double first_op_ms = -1;
  // The implementation's own set-up steps, max over ranks (Communicator::setup_ms: the rails'
  // NCCL init and connection across nodes), and what the startup numbers leave out.
  std::vector<std::pair<std::string, double>> setup_ms;
  std::string startup_note;
  std::string skipped;     // why the implementation could not run ("" = it ran)
  std::vector<Row> rows;
};

// busbw = algbw x factor (nccl-tests doc/PERFORMANCE.md).
double busbw_factor(Collective c, int world);

// results.tsv lines.
std::string format_impl(const std::string& impl);
std::string format_startup(double init_ms, double first_op_ms,
                           const std::vector<std::pair<std::string, double>>& setup_ms = {},
                           const std::string& note = "");
std::string format_row(const Row& r);
std::string format_skip(const std::string& impl, const std::string& why);

// Applies one results.tsv line to `out` (creating the ImplResult on "impl"). Returns the kind
// of line ("impl", "startup", "row", "skip", "nccl", "done", or "" when malformed).
std::string apply_line(const std::string& line, std::vector<ImplResult>& out, std::string* nccl_version);

// Table output.
void print_table_header(std::FILE* f, const ImplResult& r);
void print_startup(std::FILE* f, const ImplResult& r);
void print_row(std::FILE* f, const Row& row, const Config& c);
void print_table_footer(std::FILE* f, const ImplResult& r);
// time per size for each implementation and ratio = actorcc time / best baseline time.
void print_comparison(std::FILE* f, const std::vector<ImplResult>& results);

struct MachineInfo {
  std::vector<std::string> gpus;  // names
  std::vector<std::string> gpu_uuids;
  std::vector<std::string> gpu_pci;
  std::string driver = "none";
  std::string cuda = "none";
  std::string nccl = "none";
  std::string links = "cpu";
  std::string hostname;
};

struct RunInfo {
  MachineInfo machine;
  Config config;  // resolved
  int world = 0;
  std::string backend;  // cpu | cuda
  std::vector<int> start_order;  // ranks in the order they were started
  std::vector<int> rank_gpu;     // GPU (launcher's numbering) of each rank, empty on CPU
  std::vector<std::vector<std::string>> peers;  // "peer" lines of results.tsv, split
  std::string date;              // ISO 8601 UTC
  std::string command;
};

std::string to_json(const RunInfo& info, const std::vector<ImplResult>& results);
std::string json_escape(const std::string& s);

}  // namespace actorcc::bench
