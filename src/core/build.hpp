// The forming of a communicator: what a rank settles alone (settings, device, identity), the
// join, the peer table, the choice and setup of the backend.
#pragma once
#include <cstdint>
#include <memory>

#include "core/communicator_impl.hpp"

namespace actorcc {

// `digest`: the membership a shrunk group was formed for (core/elastic.hpp), 0 otherwise.
// `abort`: the new communicator's signal when the caller made it (a shrink, which watches the
// old group's losses meanwhile), else a fresh one.
std::unique_ptr<Communicator::Impl> build(const UniqueId& id, int rank, int world, const Options& user_options,
                                          uint64_t digest = 0, std::shared_ptr<AbortSignal> abort = nullptr);

}  // namespace actorcc
