#include "core/checked_mode.hpp"

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "actorcc/error.hpp"
#include "common/text.hpp"
#include "group/call_desc.hpp"

namespace actorcc {

void check_matching(const GroupContext& ctx, const CollArgs& a) {
  if (is_point_to_point(a.coll)) return;
  std::string blob = CallDesc::of(a).text();
  if (a.coll == Collective::AllToAllV) {
    blob += '\n';
    for (int k = 0; k < ctx.world; ++k) blob += cat(a.send_counts[k], " ", a.recv_counts[k], " ");
  }
  auto all = ctx.bootstrap->allgather(blob, Deadline::after(ctx.options.timeout));
  const auto desc = [](const std::string& b) { return b.substr(0, b.find('\n')); };  // without the counts
  std::vector<std::pair<int, std::string>> calls;
  for (size_t r = 0; r < all.size(); ++r) calls.emplace_back(static_cast<int>(r), desc(all[r]));
  if (std::any_of(calls.begin(), calls.end(), [&](const auto& c) { return c.second != calls[0].second; })) {
    // Every rank has every call: all name the same culprit, the rank off the majority.
    const MismatchVerdict v = mismatch_verdict(std::move(calls));
    throw InvalidArgument("mismatched collectives (checked mode): " + v.text, ctx.rank, v.culprit);
  }
  if (a.coll != Collective::AllToAllV) return;
  std::vector<std::vector<size_t>> sends(all.size()), recvs(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    std::istringstream is(all[r].substr(all[r].find('\n') + 1));
    sends[r].resize(ctx.world);
    recvs[r].resize(ctx.world);
    for (int k = 0; k < ctx.world; ++k) is >> sends[r][k] >> recvs[r][k];
  }
  for (int r = 0; r < ctx.world; ++r)
    for (int k = 0; k < ctx.world; ++k)
      if (sends[r][k] != recvs[k][r])
        throw InvalidArgument(cat("all_to_all_v counts disagree (checked mode): rank ", r, " sends ", sends[r][k],
                                  " elements to rank ", k, ", which expects ", recvs[k][r], " from it"),
                              ctx.rank);
}

}  // namespace actorcc
