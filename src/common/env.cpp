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

std::optional<int64_t> get_int(const char* name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  try {
    size_t used = 0;
    int64_t x = std::stoll(*v, &used, 0);
    if (used == v->size()) return x;
  } catch (const std::exception&) {
  }
  throw InvalidArgument(std::string(name) + "='" + *v + "' is not an integer");
}

std::optional<double> get_double(const char* name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  try {
    size_t used = 0;
    double x = std::stod(*v, &used);
    if (used == v->size()) return x;
  } catch (const std::exception&) {
  }
  throw InvalidArgument(std::string(name) + "='" + *v + "' is not a number");
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
