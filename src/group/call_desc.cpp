#include "group/call_desc.hpp"

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

}  // namespace actorcc
