// Tables, results.tsv lines and JSON (see report.hpp).
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

namespace actorcc::bench {
namespace {

std::vector<std::string> split_tabs(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == '\t') {
      out.push_back(cur);
      cur.clear();
    } else if (ch != '\n' && ch != '\r') {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

std::string num(double v, int prec = 6) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", prec, v);
  return b;
}

std::string clean(std::string s) {
  for (auto& ch : s)
    if (ch == '\t' || ch == '\n' || ch == '\r') ch = ' ';
  return s;
}

std::string redop_column(const Config& c) {
  if (c.coll != Collective::AllReduce && c.coll != Collective::ReduceScatter) return "none";
  return std::string(to_string(c.op));
}

}  // namespace

double busbw_factor(Collective c, int world) {
  double n = world;
  switch (c) {
    case Collective::AllReduce: return 2.0 * (n - 1) / n;
    case Collective::ReduceScatter:
    case Collective::AllGather:
    case Collective::AllToAll: return (n - 1) / n;  // nccl-tests' alltoall_perf; sendrecv_perf: 1
    default: return 1.0;
  }
}

std::string format_impl(const std::string& impl) { return "impl\t" + clean(impl) + "\n"; }
std::string format_startup(double init_ms, double first_op_ms,
                           const std::vector<std::pair<std::string, double>>& setup_ms, const std::string& note) {
  std::string steps;
  for (const auto& [k, ms] : setup_ms) steps += (steps.empty() ? "" : ",") + clean(k) + "=" + num(ms, 9);
  return "startup\t" + num(init_ms, 9) + "\t" + num(first_op_ms, 9) + "\t" + (steps.empty() ? "-" : steps) + "\t" +
         (note.empty() ? "-" : clean(note)) + "\n";
}
std::string format_row(const Row& r) {
  std::ostringstream os;
  os << "row\t" << r.bytes << "\t" << r.count << "\t" << num(r.time_us, 9) << "\t" << num(r.p50_us, 9) << "\t"
     << num(r.p99_us, 9) << "\t" << num(r.algbw, 9) << "\t" << num(r.busbw, 9) << "\t" << r.wrong << "\t"
     << (r.wrong_ranks.empty() ? "-" : clean(r.wrong_ranks)) << "\t" << (r.algo.empty() ? "-" : clean(r.algo))
     << "\n";
  return os.str();
}
std::string format_skip(const std::string& impl, const std::string& why) {
  return "skip\t" + clean(impl) + "\t" + clean(why) + "\n";
}

std::string apply_line(const std::string& line, std::vector<ImplResult>& out, std::string* nccl_version) {
  auto f = split_tabs(line);
  if (f.empty()) return "";
  const std::string& k = f[0];
  try {
    if (k == "impl" && f.size() >= 2) {
      out.push_back(ImplResult{});
      out.back().impl = f[1];
      return k;
    }
    if (k == "skip" && f.size() >= 3) {
      ImplResult r;
      r.impl = f[1];
      r.skipped = f[2];
      if (!out.empty() && out.back().impl == f[1] && out.back().rows.empty()) out.back() = r;
      else out.push_back(r);
      return k;
    }
    if (k == "nccl" && f.size() >= 2) {
      if (nccl_version) *nccl_version = f[1];
      return k;
    }
    if (k == "done") return k;
    if (out.empty()) return "";
    if (k == "startup" && f.size() >= 3) {
      out.back().init_ms = std::strtod(f[1].c_str(), nullptr);
      out.back().first_op_ms = std::strtod(f[2].c_str(), nullptr);
      if (f.size() >= 4 && f[3] != "-") {
        std::istringstream steps(f[3]);
        for (std::string kv; std::getline(steps, kv, ',');)
          if (auto eq = kv.find('='); eq != std::string::npos)
            out.back().setup_ms.emplace_back(kv.substr(0, eq), std::strtod(kv.c_str() + eq + 1, nullptr));
      }
      if (f.size() >= 5 && f[4] != "-") out.back().startup_note = f[4];
      return k;
    }
    if (k == "row" && f.size() >= 10) {
      Row r;
      r.bytes = std::stoull(f[1]);
      r.count = std::stoull(f[2]);
      r.time_us = std::strtod(f[3].c_str(), nullptr);
      r.p50_us = std::strtod(f[4].c_str(), nullptr);
      r.p99_us = std::strtod(f[5].c_str(), nullptr);
      r.algbw = std::strtod(f[6].c_str(), nullptr);
      r.busbw = std::strtod(f[7].c_str(), nullptr);
      r.wrong = std::stoull(f[8]);
      r.wrong_ranks = f[9] == "-" ? "" : f[9];
      if (f.size() >= 11 && f[10] != "-") r.algo = f[10];
      out.back().rows.push_back(r);
      return k;
    }
  } catch (...) {
  }
  return "";
}

void print_startup(std::FILE* f, const ImplResult& r) {
  std::fprintf(f, "#\n# implementation: %s\n", r.impl.c_str());
  std::fprintf(f, "# %s: init %.1f ms after the last rank arrived, first 4 KB call %.3f ms\n", r.impl.c_str(),
               r.init_ms, r.first_op_ms);
  if (!r.setup_ms.empty()) {
    std::fprintf(f, "# %s: set-up (slowest rank):", r.impl.c_str());
    for (size_t i = 0; i < r.setup_ms.size(); ++i)
      std::fprintf(f, "%s %s %.1f ms", i ? "," : "", r.setup_ms[i].first.c_str(), r.setup_ms[i].second);
    std::fprintf(f, "\n");
  }
  if (!r.startup_note.empty()) std::fprintf(f, "# %s: %s\n", r.impl.c_str(), r.startup_note.c_str());
}

void print_table_header(std::FILE* f, const ImplResult& r) {
  std::fprintf(f, "# %10s  %12s  %8s  %6s  %9s  %8s  %8s  %6s  %9s  %9s\n", "size", "count", "type", "redop",
               "time", "algbw", "busbw", "#wrong", "p50", "p99");
  std::fprintf(f, "# %10s  %12s  %8s  %6s  %9s  %8s  %8s  %6s  %9s  %9s\n", "(B)", "(elements)", "", "", "(us)",
               "(GB/s)", "(GB/s)", "", "(us)", "(us)");
  std::fflush(f);
}

void print_row(std::FILE* f, const Row& row, const Config& c) {
  std::fprintf(f, "  %10zu  %12zu  %8s  %6s  %9.2f  %8.2f  %8.2f  %6zu  %9.2f  %9.2f\n", row.bytes, row.count,
               nccl_tests_type_name(c.dtype), redop_column(c).c_str(), row.time_us, row.algbw, row.busbw, row.wrong,
               row.p50_us, row.p99_us);
  std::fflush(f);
}

void print_table_footer(std::FILE* f, const ImplResult& r) {
  if (!r.skipped.empty()) {
    std::fprintf(f, "# %s skipped: %s\n", r.impl.c_str(), r.skipped.c_str());
    return;
  }
  double sum = 0;
  size_t wrong = 0;
  for (auto& row : r.rows) {
    sum += row.busbw;
    wrong += row.wrong;
  }
  std::fprintf(f, "# %s: out of bounds values : %zu %s\n", r.impl.c_str(), wrong, wrong ? "FAILED" : "OK");
  std::fprintf(f, "# %s: avg bus bandwidth    : %.3f\n", r.impl.c_str(), r.rows.empty() ? 0.0 : sum / r.rows.size());
  std::fflush(f);
}

void print_comparison(std::FILE* f, const std::vector<ImplResult>& results) {
  std::vector<const ImplResult*> ran;
  for (auto& r : results)
    if (r.skipped.empty()) ran.push_back(&r);
  const ImplResult* mine = nullptr;
  bool have_baseline = false;
  for (auto* r : ran) {
    if (r->impl == "actorcc") mine = r;
    else have_baseline = true;
  }
  if (!mine || !have_baseline) return;
  std::fprintf(f, "#\n# comparison: time (us) per size; ratio = actorcc / best baseline (< 1: actorcc faster)\n");
  std::fprintf(f, "# %10s", "size");
  for (auto* r : ran) std::fprintf(f, "  %14s", r->impl.c_str());
  std::fprintf(f, "  %8s  %s\n", "ratio", "actorcc algorithm");
  std::fprintf(f, "# %10s", "startup");
  for (auto* r : ran) std::fprintf(f, "  %11.1f ms", r->init_ms);
  std::fprintf(f, "\n# %10s", "first 4K");
  for (auto* r : ran) std::fprintf(f, "  %11.3f ms", r->first_op_ms);
  std::fprintf(f, "\n");
  for (auto& row : mine->rows) {
    std::fprintf(f, "  %10zu", row.bytes);
    double best = INFINITY;
    for (auto* r : ran) {
      double t = NAN;
      for (auto& x : r->rows)
        if (x.bytes == row.bytes) t = x.time_us;
      if (std::isnan(t)) std::fprintf(f, "  %14s", "-");
      else std::fprintf(f, "  %14.2f", t);
      if (r != mine && !std::isnan(t)) best = std::min(best, t);
    }
    if (std::isfinite(best) && best > 0) std::fprintf(f, "  %8.3f", row.time_us / best);
    else std::fprintf(f, "  %8s", "-");
    std::fprintf(f, "  %s\n", row.algo.empty() ? "-" : row.algo.c_str());
  }
  std::fflush(f);
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (ch < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", ch);
          o += b;
        } else {
          o += static_cast<char>(ch);
        }
    }
  }
  return o;
}

std::string to_json(const RunInfo& info, const std::vector<ImplResult>& results) {
  auto q = [](const std::string& s) {
    std::string o(1, '"');
    o += json_escape(s);
    o += '"';
    return o;
  };
  auto strlist = [&](const std::vector<std::string>& v) {
    std::string o = "[";
    for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + q(v[i]);
    return o + "]";
  };
  auto intlist = [](const std::vector<int>& v) {
    std::string o = "[";
    for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + std::to_string(v[i]);
    return o + "]";
  };
  const Config& c = info.config;
  const MachineInfo& m = info.machine;
  std::ostringstream o;
  o << "{\n  \"schema\": \"actorcc-bench/1\",\n";
  o << "  \"date\": " << q(info.date) << ",\n";
  o << "  \"command\": " << q(info.command) << ",\n";
  o << "  \"machine\": {\n";
  o << "    \"gpus\": " << strlist(m.gpus) << ",\n";
  o << "    \"gpu_uuids\": " << strlist(m.gpu_uuids) << ",\n";
  o << "    \"gpu_pci\": " << strlist(m.gpu_pci) << ",\n";
  o << "    \"driver\": " << q(m.driver) << ",\n";
  o << "    \"cuda\": " << q(m.cuda) << ",\n";
  o << "    \"nccl\": " << q(m.nccl) << ",\n";
  o << "    \"hostname\": " << q(m.hostname) << ",\n";
  o << "    \"links\": " << q(m.links) << "\n  },\n";
  std::string impls;
  for (auto& r : results) impls += (impls.empty() ? "" : ",") + r.impl;
  o << "  \"settings\": {\n";
  o << "    \"launch\": " << q(launch_name(c.launch)) << ",\n";
  o << "    \"coll\": " << q(std::string(to_string(c.coll))) << ",\n";
  o << "    \"dtype\": " << q(nccl_tests_type_name(c.dtype)) << ",\n";
  o << "    \"op\": " << q(std::string(to_string(c.op))) << ",\n";
  o << "    \"ranks\": " << info.world << ",\n";
  o << "    \"nodes\": " << c.nodes << ",\n";
  o << "    \"graph\": " << (c.graph > 0 ? "true" : "false") << ",\n";
  o << "    \"graph_launches\": " << c.graph << ",\n";
  o << "    \"permute\": " << (c.permute ? "true" : "false") << ",\n";
  o << "    \"stagger_s\": " << num(c.launch == Launch::Actors ? c.stagger_s : 0.0) << ",\n";
  o << "    \"order\": " << q(order_name(c.order)) << ",\n";
  o << "    \"start_order\": " << intlist(info.start_order) << ",\n";
  o << "    \"rank_gpu\": " << intlist(info.rank_gpu) << ",\n";
  o << "    \"backend\": " << q(info.backend) << ",\n";
  o << "    \"impls\": " << q(impls) << ",\n";
  o << "    \"min_bytes\": " << c.min_bytes << ",\n";
  o << "    \"max_bytes\": " << c.max_bytes << ",\n";
  o << "    \"step_factor\": " << num(c.step_factor) << ",\n";
  o << "    \"iters\": " << c.iters << ",\n";  // 0: by size (Config::iters_for)
  o << "    \"warmup\": " << c.warmup << ",\n";
  o << "    \"check\": " << (c.check ? "true" : "false") << ",\n";
  // What a checked run checked (runs before this scheme had inputs with period 8 and one eager
  // call per size).
  if (c.check)
    o << "    \"check_scheme\": "
      << q("rank- and index-hashed inputs, host reference (tests/common/reference.hpp), bitwise; a checked call "
           "after every timed phase, graph mode: replays of the captured graphs")
      << ",\n";
  o << "    \"inplace\": " << (c.inplace ? "true" : "false") << ",\n";
  o << "    \"root\": " << c.root << ",\n";
  o << "    \"register\": " << (c.register_buffers ? "true" : "false") << ",\n";
  o << "    \"algo\": " << q(c.algo) << "\n  },\n";
  o << "  \"peers\": [";
  for (size_t i = 0; i < info.peers.size(); ++i) {
    const auto& f = info.peers[i];
    if (f.size() < 10) continue;
    o << (i ? "," : "") << "\n    {\"rank\": " << f[1] << ", \"hostname\": " << q(f[2]) << ", \"pid\": " << f[3]
      << ", \"node\": " << f[4] << ", \"local_rank\": " << f[5] << ", \"gpu_uuid\": " << q(f[6] == "-" ? "" : f[6])
      << ", \"pci_bus_id\": " << q(f[7] == "-" ? "" : f[7]) << ", \"visible_devices\": " << q(f[8]) << ", \"device\": " << f[9] << "}";
  }
  o << (info.peers.empty() ? "],\n" : "\n  ],\n");
  o << "  \"results\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    o << (i ? "," : "") << "\n    {\n      \"impl\": " << q(r.impl) << ",\n";
    if (!r.skipped.empty()) o << "      \"skipped\": " << q(r.skipped) << ",\n";
    o << "      \"startup\": {\"init_ms\": " << (r.init_ms < 0 ? "null" : num(r.init_ms))
      << ", \"first_op_ms\": " << (r.first_op_ms < 0 ? "null" : num(r.first_op_ms));
    if (!r.setup_ms.empty()) {
      o << ", \"setup_ms\": {";
      for (size_t k = 0; k < r.setup_ms.size(); ++k)
        o << (k ? ", " : "") << q(r.setup_ms[k].first) << ": " << num(r.setup_ms[k].second);
      o << "}";
    }
    if (!r.startup_note.empty()) o << ", \"note\": " << q(r.startup_note);
    o << "},\n";
    o << "      \"rows\": [";
    for (size_t j = 0; j < r.rows.size(); ++j) {
      const auto& w = r.rows[j];
      o << (j ? "," : "") << "\n        {\"bytes\": " << w.bytes << ", \"count\": " << w.count
        << ", \"time_us\": " << num(w.time_us) << ", \"p50_us\": " << num(w.p50_us)
        << ", \"p99_us\": " << num(w.p99_us) << ", \"algbw\": " << num(w.algbw) << ", \"busbw\": " << num(w.busbw)
        << ", \"wrong\": " << w.wrong;
      if (!w.algo.empty()) o << ", \"algo\": " << q(w.algo);
      if (r.impl == "actorcc") {  // extra: actorcc time / best baseline time at this size
        double best = INFINITY;
        for (auto& other : results)
          if (other.impl != "actorcc")
            for (auto& x : other.rows)
              if (x.bytes == w.bytes && x.time_us > 0) best = std::min(best, x.time_us);
        if (std::isfinite(best)) o << ", \"ratio\": " << num(w.time_us / best);
      }
      o << "}";
    }
    o << (r.rows.empty() ? "]" : "\n      ]") << "\n    }";
  }
  o << "\n  ]\n}\n";
  return o.str();
}

}  // namespace actorcc::bench
