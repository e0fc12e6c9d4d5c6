// Case counts of a test worker's matrix, by collective, dtype, op, world and size band, with
// the failures under the same keys: printed as a table (the logs quote it) and written as
// JSON. A case's size is the bytes of the largest buffer of the call (all_reduce, broadcast:
// count x element size; reduce_scatter, all_gather: the whole world's count x element size).
#pragma once
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>

#include "actorcc/types.hpp"

namespace actorcc::testref {

inline const char* size_band(size_t bytes) {
  return bytes <= 4096 ? "<=4K" : bytes <= (1u << 20) ? "<=1M" : bytes <= (64u << 20) ? "<=64M" : ">64M";
}

class Tally {
 public:
  // `op` is "-" for the collectives that do not reduce.
  void add(const std::string& coll, DataType t, const std::string& op, int world, size_t bytes, bool failed) {
    auto& c = cells_[Key{coll, std::string(to_string(t)), op, world, size_band(bytes)}];
    ++c.cases;
    c.failures += failed;
  }
  void add(const std::string& coll, DataType t, RedOp op, int world, size_t bytes, bool failed) {
    add(coll, t, std::string(to_string(op)), world, bytes, failed);
  }

  long cases() const { return total(0); }
  long failures() const { return total(1); }

  // One line per key ("COUNT coll dtype op world band cases failures"), then the totals of
  // each dimension ("COUNT-BY dimension value cases failures").
  std::string table() const {
    std::ostringstream os;
    os << "COUNT " << pad("collective", 15) << pad("dtype", 9) << pad("op", 5) << pad("world", 6) << pad("band", 6)
       << "cases failures\n";
    for (const auto& [k, c] : cells_)
      os << "COUNT " << pad(std::get<0>(k), 15) << pad(std::get<1>(k), 9) << pad(std::get<2>(k), 5)
         << pad(std::to_string(std::get<3>(k)), 6) << pad(std::get<4>(k), 6) << c.cases << " " << c.failures << "\n";
    const char* dims[] = {"collective", "dtype", "op", "world", "band"};
    for (int d = 0; d < 5; ++d)
      for (const auto& [value, c] : by(d))
        os << "COUNT-BY " << pad(dims[d], 11) << pad(value, 15) << c.cases << " " << c.failures << "\n";
    os << "COUNT-TOTAL cases " << cases() << " failures " << failures() << "\n";
    return os.str();
  }

  std::string json() const {
    std::ostringstream os;
    os << "{\"cases\": " << cases() << ", \"failures\": " << failures() << ", \"cells\": [";
    bool first = true;
    for (const auto& [k, c] : cells_) {
      os << (first ? "" : ",") << "\n  {\"collective\": \"" << std::get<0>(k) << "\", \"dtype\": \"" << std::get<1>(k)
         << "\", \"op\": \"" << std::get<2>(k) << "\", \"world\": " << std::get<3>(k) << ", \"band\": \""
         << std::get<4>(k) << "\", \"cases\": " << c.cases << ", \"failures\": " << c.failures << "}";
      first = false;
    }
    os << "\n]}\n";
    return os.str();
  }
  bool write_json(const std::string& path) const {
    std::ofstream f(path);
    f << json();
    return bool(f);
  }

 private:
  using Key = std::tuple<std::string, std::string, std::string, int, std::string>;
  struct Count {
    long cases = 0, failures = 0;
  };
  static std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' '); }
  std::map<std::string, Count> by(int dim) const {
    std::map<std::string, Count> m;
    for (const auto& [k, c] : cells_) {
      const std::string v = dim == 0 ? std::get<0>(k) : dim == 1 ? std::get<1>(k) : dim == 2 ? std::get<2>(k)
                            : dim == 3 ? std::to_string(std::get<3>(k)) : std::get<4>(k);
      m[v].cases += c.cases;
      m[v].failures += c.failures;
    }
    return m;
  }
  long total(int which) const {
    long n = 0;
    for (const auto& kv : cells_) n += which ? kv.second.failures : kv.second.cases;
    return n;
  }
  std::map<Key, Count> cells_;
};

}  // namespace actorcc::testref
