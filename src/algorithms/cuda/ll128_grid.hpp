// Host side of the LL128 routes (oneshot_ll128, twoshot_ll128 and the reduce_scatter / all_gather
// in LL128 lines): how a call's groups (kernels/ll128_lines.cuh) are cut into CTAs and rounds.
// Which buffers the lines can carry is the routes' condition (planner.cpp).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "algorithms/cuda/launch.hpp"
#include "kernels/ll128_lines.cuh"

namespace actorcc::cuda {

// How `groups` groups are cut: at least t.ll128_min_groups per CTA (small messages: fewer,
// busier CTAs) and t.ll128_busy_groups where one CTA per SM remains, otherwise spread over every
// CTA; balanced rounds of at most `cap` groups (a slot's worth) when a CTA's share exceeds it;
// no more warps than a round has groups.
struct Ll128Grid {
  size_t blocks;
  size_t groups_per_block;
  size_t round_groups;
  unsigned threads;
};
inline Ll128Grid plan_ll128(size_t groups, size_t cap, const DeviceComm& c, const Tuning& t) {
  const size_t busy = std::min(t.ll128_busy_groups, ceil_div(groups, size_t(std::max(1, c.data_blocks))));
  size_t gpb = std::max({ceil_div(groups, size_t(c.ll128_blocks)), t.ll128_min_groups, busy, size_t(1)});
  const size_t blocks = std::max<size_t>(1, ceil_div(groups, gpb));
  gpb = ceil_div(groups, blocks);
  const size_t rounds = ceil_div(gpb, std::max<size_t>(1, cap));
  const size_t round_groups = ceil_div(gpb, rounds);
  const unsigned threads = static_cast<unsigned>(std::min<size_t>(t.ll128_threads, round_groups * 32));
  return {blocks, gpb, round_groups, threads};
}

}  // namespace actorcc::cuda
