#include "common/env.hpp"

#include <cstdlib>
#include <string>

#include "actorcc/error.hpp"

namespace actorcc::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

namespace {

// The variable parsed whole by `parse` (std::stoll / std::stod style), or InvalidArgument naming it.
template <typename T, typename Parse>
std::optional<T> get_number(const char* name, Parse parse, const char* what) {
  auto v = get(name);
  if (!v) return std::nullopt;
  try {
    size_t used = 0;
    T x = parse(*v, &used);
    if (used == v->size()) return x;
  } catch (const std::exception&) {
  }
  throw InvalidArgument(std::string(name) + "='" + *v + "' is not " + what);
}

}  // namespace

std::optional<int64_t> get_int(const char* name) {
  return get_number<int64_t>(name, [](const std::string& s, size_t* used) { return std::stoll(s, used, 0); },
                             "an integer");
}

std::optional<double> get_double(const char* name) {
  return get_number<double>(name, [](const std::string& s, size_t* used) { return std::stod(s, used); }, "a number");
}

std::optional<bool> get_bool(const char* name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  std::string s;
  for (char c : *v) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  throw InvalidArgument(std::string(name) + "='" + *v + "' is not a boolean (1/0, true/false)");
}

}  // namespace actorcc::env
