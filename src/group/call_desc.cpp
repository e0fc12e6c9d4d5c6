#include "group/call_desc.hpp"

#include <algorithm>

namespace actorcc {

CallDesc CallDesc::of(const CollArgs& a) {
  CallDesc d;
  d.valid = 1;
  d.coll = static_cast<uint8_t>(a.coll);
  if (a.coll == Collective::Barrier) return d;
  d.count = a.count;
  d.dtype = static_cast<uint8_t>(a.dtype);
  if (a.coll == Collective::AllReduce || a.coll == Collective::ReduceScatter || a.coll == Collective::Reduce)
    d.op = static_cast<uint8_t>(a.op);
  if (a.coll == Collective::Broadcast || a.coll == Collective::Reduce || a.coll == Collective::Gather ||
      a.coll == Collective::Scatter)
    d.root = a.root;
  return d;
}

std::string CallDesc::text() const {
  const auto c = static_cast<Collective>(coll);
  std::string s(to_string(c));
  if (c == Collective::Barrier) return s + "()";
  s += "(count=" + std::to_string(count) + ", " + std::string(to_string(static_cast<DataType>(dtype)));
  if (c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce)
    s += ", " + std::string(to_string(static_cast<RedOp>(op)));
  if (c == Collective::Broadcast || c == Collective::Reduce || c == Collective::Gather || c == Collective::Scatter)
    s += ", root=" + std::to_string(root);
  return s + ")";
}

namespace {

std::string ranks_called(const std::vector<int>& ranks, const std::string& call) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + " called " + call;
}

}  // namespace

MismatchVerdict mismatch_verdict(std::vector<std::pair<int, std::string>> calls) {
  std::sort(calls.begin(), calls.end());
  // The distinct calls in the order of their lowest rank, each with its ranks (ascending).
  std::vector<std::pair<std::string, std::vector<int>>> sides;
  for (const auto& rc : calls) {
    auto it = std::find_if(sides.begin(), sides.end(), [&](const auto& s) { return s.first == rc.second; });
    if (it == sides.end()) it = sides.insert(sides.end(), {rc.second, {}});
    it->second.push_back(rc.first);
  }
  size_t most = 0;  // the first of the largest sides: the one holding the lowest rank
  for (size_t i = 1; i < sides.size(); ++i)
    if (sides[i].second.size() > sides[most].second.size()) most = i;
  MismatchVerdict v;
  for (size_t i = 0; i < sides.size(); ++i) {
    if (i == most) continue;
    v.tie = v.tie || sides[i].second.size() == sides[most].second.size();
    const int lowest = sides[i].second.front();
    if (v.culprit < 0 || lowest < v.culprit) v.culprit = lowest;
    v.text += ranks_called(sides[i].second, sides[i].first) + ", ";
  }
  v.text += ranks_called(sides[most].second, sides[most].first);
  if (v.tie)
    v.text += " (a tie: as many ranks made another call; the call of rank " +
              std::to_string(sides[most].second.front()) + ", the lowest of them, is taken as the majority's)";
  return v;
}

}  // namespace actorcc
