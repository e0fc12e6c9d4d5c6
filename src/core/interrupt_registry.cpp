#include "core/interrupt_registry.hpp"

#include <mutex>
#include <vector>

#include "actorcc/communicator.hpp"
#include "common/text.hpp"

namespace actorcc {

namespace {

struct Constructions {
  std::mutex mu;
  std::vector<AbortSignal*> signals;
  static Constructions& instance() {
    static Constructions c;
    return c;
  }
};

std::string interrupted_text(int rank) { return cat("rank ", rank, " was interrupted"); }

}  // namespace

ConstructionScope::ConstructionScope(AbortSignal* signal) : signal_(signal) {
  auto& c = Constructions::instance();
  std::lock_guard<std::mutex> g(c.mu);
  c.signals.push_back(signal_);
}

ConstructionScope::~ConstructionScope() {
  auto& c = Constructions::instance();
  std::lock_guard<std::mutex> g(c.mu);
  std::erase(c.signals, signal_);
}

bool interrupted(const AbortSignal& signal, int rank) {
  return signal.raised() && signal.reason().starts_with(interrupted_text(rank));
}

void interrupt_constructions(const std::string& reason) {
  auto& c = Constructions::instance();
  std::lock_guard<std::mutex> g(c.mu);
  for (AbortSignal* s : c.signals)
    s->raise(s->self_rank(), ErrorCode::Remote, interrupted_text(s->self_rank()) + ": " + reason);
}

}  // namespace actorcc
