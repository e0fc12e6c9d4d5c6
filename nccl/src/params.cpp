// NCCL 2.30.4's parameter API (ncclParamBind, ncclParamGet*, ncclParamGetParameter,
// ncclParamGetAllParameterKeys, ncclParamDumpAll) over actorcc's settings. NCCL's own parameters
// (NCCL_*) tune NCCL's transports and kernels, which this library does not run, so a key is known
// only where actorcc has a setting with its meaning: actorcc's settings under their own names, and
// the NCCL names that mean the same thing. Every other key is unknown (ncclInvalidArgument, as
// NCCL answers a key it never registered). The values are what the library runs with: the
// variable when it is set, else the default (read at each call, as the settings are).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "actorcc/options.hpp"
#include "comm.hpp"
#include "common/env.hpp"
#include "common/log.hpp"

namespace {
using namespace actorcc;
using namespace actorcc::ncclabi;

enum class Kind { Int, Bool, Seconds, Text };

std::string seconds_text(std::chrono::milliseconds ms) {
  std::string s = std::to_string(ms.count() / 1000.0);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}
std::string default_join_timeout() { return seconds_text(Options{}.join_timeout); }
std::string default_timeout() { return seconds_text(Options{}.timeout); }

}  // namespace

// A handle is a row of the table below (ncclParamHandle_t points at it; never freed).
struct ncclParamHandle {
  const char* key;       // what a client binds
  const char* variable;  // the actorcc setting that holds it (docs/settings.md)
  Kind kind;
  std::string (*fallback)();  // its default when the variable is unset
};

namespace {
// The one mapping of parameter keys onto actorcc's settings.
const ncclParamHandle kParams[] = {
    {"ACTORCC_TIMEOUT_S", "ACTORCC_TIMEOUT_S", Kind::Seconds, default_timeout},
    {"ACTORCC_JOIN_TIMEOUT_S", "ACTORCC_JOIN_TIMEOUT_S", Kind::Seconds, default_join_timeout},
    {"ACTORCC_BACKEND", "ACTORCC_BACKEND", Kind::Text, [] { return std::string("auto"); }},
    {"ACTORCC_ALGO", "ACTORCC_ALGO", Kind::Text, [] { return std::string(); }},
    {"ACTORCC_CHECKED", "ACTORCC_CHECKED", Kind::Bool, [] { return std::string("0"); }},
    {"ACTORCC_WORKSPACE_BYTES", "ACTORCC_WORKSPACE_BYTES", Kind::Int, [] { return std::string("0"); }},
    {"ACTORCC_LOG", "ACTORCC_LOG", Kind::Text, [] { return std::string("warn"); }},
    // NCCL's names with an actorcc meaning: the algorithm every call is forced to (actorcc's own
    // names: oneshot, twoshot, ...; "" = the planner's choice), and the identity that decides which
    // ranks share a node ("" = hostname + boot id).
    {"NCCL_ALGO", "ACTORCC_ALGO", Kind::Text, [] { return std::string(); }},
    {"NCCL_HOSTID", "ACTORCC_NODE_ID", Kind::Text, [] { return std::string(); }},
};
constexpr int kNumParams = static_cast<int>(sizeof kParams / sizeof kParams[0]);

// NCCL's keys are also bound without their prefix ("ALGO" for NCCL_ALGO), as NCCL names its
// parameters in its own tables.
const ncclParamHandle* find(const char* key) {
  for (const auto& p : kParams)
    if (std::strcmp(p.key, key) == 0 ||
        (std::strncmp(p.key, "NCCL_", 5) == 0 && std::strcmp(p.key + 5, key) == 0))
      return &p;
  return nullptr;
}
bool is_row(const ncclParamHandle* h) { return h >= kParams && h < kParams + kNumParams; }

ncclResult_t bad_param(const char* fn, const std::string& why) {
  return set_error(nullptr, ncclInvalidArgument, std::string(fn) + ": " + why);
}
std::string unknown(const char* key) {
  return std::string("unknown parameter '") + key +
         "': actorcc has no setting with its meaning (ncclParamGetAllParameterKeys lists those it has)";
}

// The value as text: the variable's (checked as the setting's reader checks it), else the default.
std::string text_of(const ncclParamHandle& p) {
  auto v = env::get(p.variable);
  if (!v) return p.fallback();
  if (p.kind == Kind::Int) (void)env::get_int(p.variable);  // throws InvalidArgument on a bad value
  if (p.kind == Kind::Seconds) (void)env::get_double(p.variable);
  if (p.kind == Kind::Bool) return *env::get_bool(p.variable) ? "1" : "0";
  return *v;
}
// The value as a number (Int, Bool, Seconds); a Seconds value must be whole for an integer getter.
std::optional<long double> number_of(const ncclParamHandle& p) {
  if (p.kind == Kind::Text) return std::nullopt;
  return std::stold(text_of(p));
}

thread_local std::string t_str, t_param;
thread_local std::vector<const char*> t_keys;

template <typename T>
ncclResult_t get_int(ncclParamHandle_t h, T* out, const char* fn) {
  try {
    if (!h || !is_row(h)) return bad_param(fn, "the handle is not one ncclParamBind returned");
    if (!out) return bad_param(fn, std::string(h->key) + ": out is NULL");
    const auto n = number_of(*h);
    if (!n) return bad_param(fn, std::string(h->key) + " is text, not a number: read it with ncclParamGetStr");
    if (*n != std::floor(*n) || *n < static_cast<long double>(std::numeric_limits<T>::min()) ||
        *n > static_cast<long double>(std::numeric_limits<T>::max()))
      return bad_param(fn, std::string(h->key) + " = " + text_of(*h) + " does not fit this integer type");
    *out = static_cast<T>(*n);
    return ncclSuccess;
  } catch (...) {
    return fail_current(nullptr, fn);
  }
}
}  // namespace

extern "C" ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  if (!out || !key) return bad_param("ncclParamBind", out ? "key is NULL" : "out is NULL");
  const ncclParamHandle* p = find(key);
  if (!p) return bad_param("ncclParamBind", unknown(key));
  *out = const_cast<ncclParamHandle*>(p);
  return ncclSuccess;
}
ACTORCC_NCCL_ALIAS(ncclParamBind)

#define ACTORCC_NCCL_PARAM_GETTER(name, type) \
  extern "C" ncclResult_t name(ncclParamHandle_t h, type* out) { return get_int(h, out, #name); } \
  ACTORCC_NCCL_ALIAS(name)
ACTORCC_NCCL_PARAM_GETTER(ncclParamGetI8, int8_t)
ACTORCC_NCCL_PARAM_GETTER(ncclParamGetI16, int16_t)
ACTORCC_NCCL_PARAM_GETTER(ncclParamGetI32, int32_t)
ACTORCC_NCCL_PARAM_GETTER(ncclParamGetI64, int64_t)
ACTORCC_NCCL_PARAM_GETTER(ncclParamGetU8, uint8_t)
ACTORCC_NCCL_PARAM_GETTER(ncclParamGetU16, uint16_t)
ACTORCC_NCCL_PARAM_GETTER(ncclParamGetU32, uint32_t)
ACTORCC_NCCL_PARAM_GETTER(ncclParamGetU64, uint64_t)
#undef ACTORCC_NCCL_PARAM_GETTER

extern "C" ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out) {
  const char* fn = "ncclParamGetStr";
  try {
    if (!h || !is_row(h)) return bad_param(fn, "the handle is not one ncclParamBind returned");
    if (!out) return bad_param(fn, std::string(h->key) + ": out is NULL");
    // NCCL's rule: a typed parameter is read with its typed getter.
    if (h->kind != Kind::Text) return bad_param(fn, std::string(h->key) + " is a number: read it with ncclParamGetI64");
    t_str = text_of(*h);
    *out = t_str.c_str();
    return ncclSuccess;
  } catch (...) {
    return fail_current(nullptr, fn);
  }
}
ACTORCC_NCCL_ALIAS(ncclParamGetStr)

// The raw bytes: an int64 for an integer or flag, a double for seconds, the text and its NUL.
extern "C" ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  const char* fn = "ncclParamGet";
  try {
    if (!h || !is_row(h)) return bad_param(fn, "the handle is not one ncclParamBind returned");
    if (!out || !len) return bad_param(fn, std::string(h->key) + ": out or len is NULL");
    std::string bytes;
    if (h->kind == Kind::Text) {
      bytes = text_of(*h);
      bytes.push_back('\0');
    } else if (h->kind == Kind::Seconds) {
      const double d = static_cast<double>(*number_of(*h));
      bytes.assign(reinterpret_cast<const char*>(&d), sizeof d);
    } else {
      const int64_t i = static_cast<int64_t>(*number_of(*h));
      bytes.assign(reinterpret_cast<const char*>(&i), sizeof i);
    }
    *len = static_cast<int>(bytes.size());
    if (maxLen < *len)
      return bad_param(fn, std::string(h->key) + " needs " + std::to_string(*len) + " bytes, maxLen is " +
                            std::to_string(maxLen));
    std::memcpy(out, bytes.data(), bytes.size());
    return ncclSuccess;
  } catch (...) {
    return fail_current(nullptr, fn);
  }
}
ACTORCC_NCCL_ALIAS(ncclParamGet)

extern "C" ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  const char* fn = "ncclParamGetParameter";
  try {
    if (!key || !value || !valueLen) return bad_param(fn, "key, value or valueLen is NULL");
    const ncclParamHandle* p = find(key);
    if (!p) return bad_param(fn, unknown(key));
    t_param = text_of(*p);
    *value = t_param.c_str();
    *valueLen = static_cast<int>(t_param.size());
    return ncclSuccess;
  } catch (...) {
    return fail_current(nullptr, fn);
  }
}
ACTORCC_NCCL_ALIAS(ncclParamGetParameter)

extern "C" ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  const char* fn = "ncclParamGetAllParameterKeys";
  try {
    if (!table || !tableLen) return bad_param(fn, "table or tableLen is NULL");
    t_keys.clear();
    for (const auto& p : kParams) t_keys.push_back(p.key);
    *table = t_keys.data();
    *tableLen = kNumParams;
    return ncclSuccess;
  } catch (...) {
    return fail_current(nullptr, fn);
  }
}
ACTORCC_NCCL_ALIAS(ncclParamGetAllParameterKeys)

// NCCL writes the table to its log; here to actorcc's log (stderr), whatever ACTORCC_LOG says,
// since the caller asked for it.
extern "C" void ncclParamDumpAll() {
  for (const auto& p : kParams) {
    try {
      log::write(log::Level::Info, std::string("NCCL parameter ") + p.key + " = '" + text_of(p) + "' (actorcc setting " +
                                       p.variable + (env::get(p.variable) ? ", set" : ", default") + ")");
    } catch (const std::exception& e) {
      log::write(log::Level::Warn, std::string("NCCL parameter ") + p.key + ": " + e.what());
    }
  }
}
ACTORCC_NCCL_ALIAS(ncclParamDumpAll)
