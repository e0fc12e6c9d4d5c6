// What the workers report to the launcher: each rank's last step (<run-dir>/rank<R>.status)
// and rank 0's results (<run-dir>/results.tsv), printed as they arrive; and the end of a run
// whose workers all exited 0: wrong results and missing implementations named, the JSON
// written.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "actorcc/actorcc.hpp"
#include "sysinfo.hpp"

#include "launcher.hpp"

namespace actorcc::bench {

void Launcher::read_status() {
  for (auto& w : workers_) {
    if (!w.started) continue;
    std::ifstream f(run_dir_ + "/rank" + std::to_string(w.rank) + ".status");
    std::string line;
    if (!std::getline(f, line)) continue;
    auto tab = line.find('\t');
    if (tab == std::string::npos) continue;
    uint64_t seq = std::strtoull(line.substr(0, tab).c_str(), nullptr, 10);
    if (seq != w.status_seq) {
      w.status_seq = seq;
      w.status_text = line.substr(tab + 1);
      last_progress_ = Clock::now();
    }
  }
}

void Launcher::read_results() {
  std::ifstream f(run_dir_ + "/results.tsv", std::ios::binary);
  if (!f) return;
  f.seekg(static_cast<std::streamoff>(results_offset_));
  std::string chunk((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  results_offset_ += chunk.size();
  partial_ += chunk;
  size_t nl;
  while ((nl = partial_.find('\n')) != std::string::npos) {
    std::string line = partial_.substr(0, nl);
    partial_.erase(0, nl + 1);
    if (line.rfind("peer\t", 0) == 0) {
      std::vector<std::string> f;
      std::stringstream ss(line);
      std::string item;
      while (std::getline(ss, item, '\t')) f.push_back(item);
      if (f.size() >= 10) {
        std::printf("# rank %s: host %s pid %s, node %s local rank %s, GPU %s (%s), CUDA_VISIBLE_DEVICES=%s\n",
                    f[1].c_str(), f[2].c_str(), f[3].c_str(), f[4].c_str(), f[5].c_str(), f[6].c_str(), f[7].c_str(),
                    f[8].c_str());
        std::fflush(stdout);
        peers_.push_back(f);
      }
      continue;
    }
    std::string kind = apply_line(line, results_, &nccl_version_);
    if (kind == "impl") flush_footers(results_.size() - 1);
    if (kind == "startup") {
      print_startup(stdout, results_.back());
      print_table_header(stdout, results_.back());
    } else if (kind == "row") {
      print_row(stdout, results_.back().rows.back(), c_);
    } else if (kind == "skip") {
      flush_footers(results_.size());
    } else if (kind == "done") {
      done_ = true;
    }
  }
}

int Launcher::finish() {
  read_status();
  read_results();
  flush_footers(results_.size());
  if (!done_) {
    std::fprintf(stderr, "actorcc-bench: FAILED: every worker exited 0 but rank 0 reported no end of run\n");
    return kExitFailed;
  }
  print_comparison(stdout, results_);
  int rc = kExitOk;

  // Wrong results: name the implementation, size and ranks.
  for (auto& r : results_)
    for (auto& row : r.rows)
      if (row.wrong) {
        std::string ranks;
        for (auto& part : split(row.wrong_ranks, ',')) {
          auto colon = part.find(':');
          ranks += (ranks.empty() ? "" : ", ") + std::string("rank ") + part.substr(0, colon) + ": " +
                   part.substr(colon + 1) + " wrong elements";
        }
        std::fprintf(stderr, "actorcc-bench: WRONG RESULTS: %s %s %zu B: %s\n", r.impl.c_str(),
                     std::string(to_string(c_.coll)).c_str(), row.bytes, ranks.c_str());
        rc = kExitWrong;
      }
  for (auto& r : results_)
    if (!r.skipped.empty() && c_.impls_explicit) {
      std::fprintf(stderr, "actorcc-bench: FAILED: %s was asked for but could not run: %s\n", r.impl.c_str(),
                   r.skipped.c_str());
      if (rc == kExitOk) rc = kExitFailed;
    }

  if (!c_.json_path.empty()) {
    RunInfo info;
    info.config = c_;
    info.world = world_;
    info.backend = backend_;
    info.start_order = order_;
    info.peers = peers_;
    for (auto& w : workers_)
      if (w.gpu >= 0) info.rank_gpu.push_back(w.gpu);
    info.date = iso_date();
    for (auto& a : argv_) info.command += (info.command.empty() ? "" : " ") + a;
    MachineInfo& m = info.machine;
    m = machine_info(probe_, backend_ == "cuda");
    if (!nccl_version_.empty()) m.nccl = nccl_version_;
    std::error_code ec;
    auto parent = std::filesystem::path(c_.json_path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    std::ofstream f(c_.json_path);
    f << to_json(info, results_);
    if (!f) {
      std::fprintf(stderr, "actorcc-bench: cannot write %s\n", c_.json_path.c_str());
      return kExitFailed;
    }
    f.close();
    std::printf("# wrote %s\n", c_.json_path.c_str());

    if (c_.plot) write_plot(c_.json_path, c_.plot_script);
  }
  std::fflush(stdout);
  return rc;
}

}  // namespace actorcc::bench
