#include "core/departures.hpp"

#include "actorcc/error.hpp"
#include "common/text.hpp"

namespace actorcc {

namespace {

std::string left_text(int who, uint64_t after, uint64_t call) {
  return cat("rank ", who, " closed the communicator after ", after,
             " collective call(s); this rank's collective call ", call, " needs it");
}

}  // namespace

void Departures::start(int rank, int world) {
  rank_ = rank;
  world_ = world;
  left_after_.assign(world, std::nullopt);
}

void Departures::on_departure(const Bootstrap::Departure& d, AbortSignal& abort) {
  if (d.rank < 0 || d.rank >= world_) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    left_after_[d.rank] = d.collectives;
  }
  const uint64_t issued = collectives_.load();
  if (issued > d.collectives)
    abort.raise(d.rank, ErrorCode::Remote, left_text(d.rank, d.collectives, d.collectives + 1));
}

void Departures::enter(const CollArgs& a) {
  if (!is_point_to_point(a.coll)) {
    const uint64_t k = collectives_.fetch_add(1) + 1;
    std::lock_guard<std::mutex> g(mu_);
    for (int r = 0; r < world_; ++r)
      if (left_after_[r] && k > *left_after_[r]) throw RemoteError(left_text(r, *left_after_[r], k), r, rank_);
    return;
  }
  std::lock_guard<std::mutex> g(mu_);
  auto refuse_peer = [&](int peer) {
    if (peer >= 0 && peer < world_ && left_after_[peer])
      throw RemoteError(cat("rank ", peer, " closed the communicator; a ", to_string(a.coll), " with it cannot complete"),
                        peer, rank_);
  };
  if (a.coll != Collective::SendRecv) return refuse_peer(a.peer);
  for (size_t i = 0; i < a.num_ops; ++i) refuse_peer(a.ops[i].peer);
}

}  // namespace actorcc
