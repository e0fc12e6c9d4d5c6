// The AbortSignals of the communicators being constructed in this process, so that
// interrupt_constructions() (include/actorcc/communicator.hpp) reaches every one of them.
#pragma once
#include <string>

#include "common/abort_signal.hpp"

namespace actorcc {

// Registers `signal` for as long as the scope lives: the span of one communicator's construction.
class ConstructionScope {
 public:
  explicit ConstructionScope(AbortSignal* signal);
  ~ConstructionScope();
  ConstructionScope(const ConstructionScope&) = delete;
  ConstructionScope& operator=(const ConstructionScope&) = delete;

 private:
  AbortSignal* signal_;
};

// Whether `signal` was raised by interrupt_constructions() while rank `rank` was being built.
bool interrupted(const AbortSignal& signal, int rank);

}  // namespace actorcc
