// Reading ACTORCC_* settings. Each setting is read next to the code that uses it, with a
// comment `// setting: ACTORCC_X - what it does`, so docs/settings.md can be checked by grep.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace actorcc::env {

std::optional<std::string> get(const char* name);
// Parsed values; a malformed value throws InvalidArgument naming the variable.
std::optional<int64_t> get_int(const char* name);
std::optional<double> get_double(const char* name);
std::optional<bool> get_bool(const char* name);  // 1/0, true/false, yes/no, on/off

}  // namespace actorcc::env

