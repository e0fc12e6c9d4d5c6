#include "backends/cuda/cuda_settings.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "actorcc/error.hpp"
#include "common/env.hpp"

namespace actorcc::cuda {

namespace {

constexpr const char* kMagic = "actorcc-cuda-settings";
constexpr int kVersion = 1;

template <typename T>
void read(T& field, const char* name, size_t lo, size_t hi, size_t step, bool is_bool) {
  if (is_bool) {
    if (auto v = env::get_bool(name)) field = *v ? 1 : 0;
    return;
  }
  auto v = env::get_int(name);
  if (v && (*v > 0 || (lo == 0 && *v == 0))) field = static_cast<T>(std::clamp(static_cast<size_t>(*v), lo, hi) / step * step);
}

// Fields besides the table's.
constexpr int kExtraFields = 3;  // workspace_bytes, ll_slot_bytes, algo

}  // namespace

Settings Settings::local(const Options& options, int sm_count) {
  Settings s;
  Tuning& t = s.tune;
#define ACTORCC_SETTING_READ(field, type, env, dflt, lo, hi, step, is_bool, doc_dflt, doc) \
  read(t.field, "ACTORCC_CUDA_" #env, lo, hi, step, is_bool);
  ACTORCC_CUDA_SETTINGS(ACTORCC_SETTING_READ)
#undef ACTORCC_SETTING_READ
#define ACTORCC_SETTING_READ(field, type, env, dflt, lo, hi, step, is_bool, doc_dflt, doc) \
  read(s.own.field, "ACTORCC_CUDA_" #env, lo, hi, step, is_bool);
  ACTORCC_CUDA_RANK_SETTINGS(ACTORCC_SETTING_READ)
#undef ACTORCC_SETTING_READ
  if (t.data_blocks == 0) t.data_blocks = static_cast<int>(std::min<size_t>(kMaxCtaSetting, size_t(std::max(1, sm_count))));
  // Default 136 MiB of push slots: with 132 CTAs and 2 ranks that is 128 KiB tiles, so a
  // 64 MiB all-reduce takes exactly two rounds.
  s.workspace_bytes = options.workspace_bytes ? options.workspace_bytes : (136u << 20);
  s.algo = options.algo;
  return s;
}

std::string Settings::encode() const {
  std::ostringstream os;
  int n = kExtraFields;
#define ACTORCC_SETTING_COUNT(field, ...) ++n;
  ACTORCC_CUDA_SETTINGS(ACTORCC_SETTING_COUNT)
#undef ACTORCC_SETTING_COUNT
  os << kMagic << ' ' << kVersion << ' ' << n;
#define ACTORCC_SETTING_PUT(field, ...) os << ' ' << #field << '=' << tune.field;
  ACTORCC_CUDA_SETTINGS(ACTORCC_SETTING_PUT)
#undef ACTORCC_SETTING_PUT
  os << " workspace_bytes=" << workspace_bytes << " ll_slot_bytes=" << ll_slot_bytes
     << " algo=" << (algo.empty() ? "-" : algo);
  return os.str();
}

Settings Settings::decode(const std::string& blob) {
  std::istringstream is(blob);
  std::string magic;
  int version = 0, n = 0;
  is >> magic >> version >> n;
  if (magic != kMagic || version != kVersion)
    throw InvalidArgument("CUDA settings from another actorcc (got '" + magic + " " + std::to_string(version) +
                          "', this one speaks '" + kMagic + " " + std::to_string(kVersion) + "')");
  std::map<std::string, std::string> kv;
  for (std::string item; is >> item;) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || !kv.emplace(item.substr(0, eq), item.substr(eq + 1)).second)
      throw InvalidArgument("CUDA settings: malformed or repeated field '" + item + "'");
  }
  if (kv.size() != size_t(n)) throw InvalidArgument("CUDA settings: " + std::to_string(kv.size()) +
                                                    " fields where the header says " + std::to_string(n));
  auto take = [&](const char* name) {
    auto it = kv.find(name);
    if (it == kv.end()) throw InvalidArgument(std::string("CUDA settings: field '") + name + "' missing");
    std::string v = it->second;
    kv.erase(it);
    return v;
  };
  auto number = [&](const char* name) {
    const std::string v = take(name);
    try {
      size_t used = 0;
      const unsigned long long x = std::stoull(v, &used);
      if (used == v.size()) return x;
    } catch (const std::exception&) {
    }
    throw InvalidArgument(std::string("CUDA settings: field '") + name + "' = '" + v + "' is not a number");
  };
  Settings s;
#define ACTORCC_SETTING_GET(field, type, ...) s.tune.field = static_cast<type>(number(#field));
  ACTORCC_CUDA_SETTINGS(ACTORCC_SETTING_GET)
#undef ACTORCC_SETTING_GET
  s.workspace_bytes = number("workspace_bytes");
  s.ll_slot_bytes = number("ll_slot_bytes");
  s.algo = take("algo");
  if (s.algo == "-") s.algo.clear();
  if (!kv.empty()) throw InvalidArgument("CUDA settings: unknown field '" + kv.begin()->first + "'");
  return s;
}

std::string settings_doc_rows() {
  std::ostringstream os;
#define ACTORCC_SETTING_DOC(field, type, env, dflt, lo, hi, step, is_bool, doc_dflt, doc) \
  os << "| ACTORCC_CUDA_" #env " | " << doc << " | " << doc_dflt << " |\n";
  ACTORCC_CUDA_SETTINGS(ACTORCC_SETTING_DOC)
  ACTORCC_CUDA_RANK_SETTINGS(ACTORCC_SETTING_DOC)
#undef ACTORCC_SETTING_DOC
  return os.str();
}

}  // namespace actorcc::cuda
