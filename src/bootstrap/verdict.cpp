#include "bootstrap/verdict.hpp"

#include <cstdio>

#include "common/text.hpp"

namespace actorcc {

Attempt attempt_of(const std::exception& e) {
  if (const auto* err = dynamic_cast<const Error*>(&e)) return {Outcomes::reason(e), err->code(), err->culprit()};
  return {Outcomes::reason(e), ErrorCode::Internal};
}

Verdict failed_ranks(Bootstrap& bs, Deadline dl, const Attempt& mine) {
  // The status word carries the code and the culprit: "fail<code>:<culprit>".
  auto o = Outcomes::gather(
      bs, mine.error.empty() ? "ok" : cat("fail", static_cast<int>(mine.code), ":", mine.culprit), mine.error, dl);
  Verdict v;
  if (o.all_ok()) return v;
  v.text = "\n  " + o.reasons("", "\n  ");
  const int first = o.ranks().front();
  const std::string& st = o.status(first);
  int code = 0, culprit = -1;
  if (std::sscanf(st.c_str(), "fail%d:%d", &code, &culprit) < 1) code = 0;
  if (code >= static_cast<int>(ErrorCode::Internal) && code <= static_cast<int>(ErrorCode::Unsupported))
    v.code = static_cast<ErrorCode>(code);
  v.culprit = culprit >= 0 && culprit < o.world() ? culprit : first;
  return v;
}

}  // namespace actorcc
