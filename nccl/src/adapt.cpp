// Placeholder until the reduction adapters land: nothing is adapted, so the core serves what it
// takes natively and refuses the rest (fp8 reductions, unsigned min/max/avg, PreMulSum).
#include "adapt.hpp"

namespace actorcc::ncclabi {

struct AdaptState {};
void AdaptStateDeleter::operator()(AdaptState* s) const noexcept { delete s; }
AdaptStatePtr make_adapt_state(Communicator&) { return AdaptStatePtr(new AdaptState()); }
bool run_adapted(Communicator&, AdaptState&, const ReduceCall&) { return false; }
int create_premul(AdaptState&, int*, void*, int, int) { return 5; /* ncclInvalidUsage: not built in */ }
int destroy_premul(AdaptState&, int) { return 5; }

}  // namespace actorcc::ncclabi
