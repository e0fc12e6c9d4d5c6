#include "bootstrap/outcomes.hpp"

#include "common/text.hpp"

namespace actorcc {

Outcomes Outcomes::gather(Bootstrap& bs, const std::string& status, const std::string& text, Deadline dl) {
  // One word, a space, then the text (which may hold spaces or be empty).
  auto all = bs.allgather(status + " " + text, dl);
  Outcomes o;
  for (const auto& s : all) {
    const size_t sp = s.find(' ');
    o.status_.push_back(s.substr(0, sp));
    o.text_.push_back(sp == std::string::npos ? std::string() : s.substr(sp + 1));
  }
  return o;
}

bool Outcomes::all_ok() const {
  for (const auto& s : status_)
    if (s != "ok") return false;
  return true;
}

std::vector<int> Outcomes::ranks(const std::string& status) const {
  std::vector<int> out;
  for (int r = 0; r < world(); ++r)
    if (status.empty() ? status_[r] != "ok" : status_[r] == status) out.push_back(r);
  return out;
}

std::string Outcomes::reasons(const std::string& status, const std::string& sep) const {
  std::string out;
  for (int r : ranks(status)) {
    if (out.size() > 2000) return out + sep + "...";
    out += cat(out.empty() ? "" : sep, "rank ", r, ": ", text_[r]);
  }
  return out;
}

}  // namespace actorcc
