// cat() and join(): texts (error messages above all) built from their pieces in reading order,
// instead of chains of `+ std::to_string(x) +`. Numbers are written as std::to_string writes them
// (a double with six decimals), so a text converted to cat() reads byte for byte as before.
#pragma once
#include <concepts>
#include <string>
#include <string_view>

namespace actorcc {

namespace text_detail {

inline void append(std::string& out, std::string_view s) { out.append(s); }
inline void append(std::string& out, char c) { out.push_back(c); }
// bool and char are left out on purpose: a flag or a byte printed as a number is a slip.
template <typename T>
  requires(std::integral<T> && !std::same_as<T, bool> && !std::same_as<T, char>)
void append(std::string& out, T v) {
  out += std::to_string(v);
}
template <std::floating_point T>
void append(std::string& out, T v) {
  out += std::to_string(v);
}

}  // namespace text_detail

// The pieces one after another: strings, string_views, characters, integers and floating-point
// numbers.
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (text_detail::append(out, parts), ...);
  return out;
}

// The elements of `range` (anything cat() takes) with `sep` between them: join({1, 2}, ", ") is
// "1, 2", and an empty range gives "".
template <typename Range>
std::string join(const Range& range, std::string_view sep) {
  std::string out;
  bool first = true;
  for (const auto& e : range) {
    if (!first) out.append(sep);
    first = false;
    text_detail::append(out, e);
  }
  return out;
}

}  // namespace actorcc
