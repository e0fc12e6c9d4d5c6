// Names, sizes and parsers of the public value types.
#include <algorithm>
#include <array>
#include <string>

#include "actorcc/error.hpp"
#include "actorcc/types.hpp"

namespace actorcc {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

struct Alias {
  const char* name;
  int value;
};

template <typename E, size_t N>
E parse_with(std::string_view text, const std::array<Alias, N>& table, const char* what) {
  std::string s = lower(text);
  for (const auto& a : table)
    if (s == a.name) return static_cast<E>(a.value);
  std::string known;
  for (const auto& a : table) known += std::string(known.empty() ? "" : ", ") + a.name;
  throw InvalidArgument("unknown " + std::string(what) + " '" + std::string(text) + "' (known: " + known + ")");
}

constexpr std::array<Alias, 22> kDtypeNames{{
    {"float32", 0}, {"float", 0}, {"fp32", 0}, {"f32", 0},
    {"float16", 1}, {"half", 1}, {"fp16", 1}, {"f16", 1},
    {"bfloat16", 2}, {"bf16", 2},
    {"float64", 3}, {"double", 3}, {"fp64", 3}, {"f64", 3},
    {"int8", 4}, {"uint8", 5}, {"int32", 6}, {"int", 6}, {"int64", 7}, {"long", 7},
    {"char", 4}, {"u8", 5},
}};
constexpr std::array<Alias, 6> kOpNames{{{"sum", 0}, {"prod", 1}, {"min", 2}, {"max", 3}, {"avg", 4}, {"mean", 4}}};
constexpr std::array<Alias, 4> kBackendNames{{{"auto", 0}, {"cpu", 1}, {"cuda", 2}, {"gpu", 2}}};
constexpr std::array<Alias, 20> kCollNames{{{"all_reduce", 0}, {"allreduce", 0}, {"reduce_scatter", 1},
                                            {"reducescatter", 1}, {"all_gather", 2}, {"allgather", 2},
                                            {"broadcast", 3}, {"bcast", 3}, {"barrier", 4},
                                            {"send", 5}, {"recv", 6}, {"send_recv", 7}, {"sendrecv", 7},
                                            {"all_to_all", 8}, {"alltoall", 8}, {"all_to_all_v", 9},
                                            {"alltoallv", 9}, {"reduce", 10}, {"gather", 11}, {"scatter", 12}}};

}  // namespace

size_t dtype_size(DataType t) noexcept {
  switch (t) {
    case DataType::Float32: return 4;
    case DataType::Float16: return 2;
    case DataType::BFloat16: return 2;
    case DataType::Float64: return 8;
    case DataType::Int8: return 1;
    case DataType::UInt8: return 1;
    case DataType::Int32: return 4;
    case DataType::Int64: return 8;
  }
  return 0;
}

std::string_view to_string(DataType t) noexcept {
  static constexpr const char* n[] = {"float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64"};
  auto i = static_cast<unsigned>(t);
  return i < kNumDataTypes ? n[i] : "invalid";
}
std::string_view to_string(RedOp op) noexcept {
  static constexpr const char* n[] = {"sum", "prod", "min", "max", "avg"};
  auto i = static_cast<unsigned>(op);
  return i < kNumRedOps ? n[i] : "invalid";
}
std::string_view to_string(Backend b) noexcept {
  static constexpr const char* n[] = {"auto", "cpu", "cuda"};
  auto i = static_cast<unsigned>(b);
  return i < 3 ? n[i] : "invalid";
}
std::string_view to_string(Collective c) noexcept {
  static constexpr const char* n[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier",
                                      "send",       "recv",           "send_recv",  "all_to_all", "all_to_all_v",
                                      "reduce",     "gather",         "scatter"};
  static_assert(sizeof n / sizeof n[0] == kNumCollectives);
  auto i = static_cast<unsigned>(c);
  return i < kNumCollectives ? n[i] : "invalid";
}

DataType parse_dtype(std::string_view s) { return parse_with<DataType>(s, kDtypeNames, "dtype"); }
RedOp parse_redop(std::string_view s) { return parse_with<RedOp>(s, kOpNames, "reduction op"); }
Backend parse_backend(std::string_view s) { return parse_with<Backend>(s, kBackendNames, "backend"); }
Collective parse_collective(std::string_view s) { return parse_with<Collective>(s, kCollNames, "collective"); }

}  // namespace actorcc
