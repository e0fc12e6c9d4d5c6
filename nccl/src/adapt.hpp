// Reductions that actorcc's core cannot take as NCCL passes them: the fp8 types, unsigned
// min/max/avg, and PreMulSum ops (ncclRedOpCreatePreMulSum). Each is rewritten as element-wise
// passes on the call's stream around one native collective (docs/nccl-types.md).
#pragma once
#include <cstddef>
#include <memory>

#include "actorcc/communicator.hpp"

namespace actorcc::ncclabi {

struct AdaptState;  // per communicator: PreMulSum ops, scratch memory
struct AdaptStateDeleter {
  void operator()(AdaptState*) const noexcept;
};
using AdaptStatePtr = std::unique_ptr<AdaptState, AdaptStateDeleter>;
AdaptStatePtr make_adapt_state(Communicator& comm);

enum class ReduceKind { AllReduce, ReduceScatter, Reduce };
struct ReduceCall {
  ReduceKind kind;
  const void* send;
  void* recv;
  size_t count;  // as NCCL counts it (recvcount for reduce-scatter)
  int dtype;     // ncclDataType_t value
  int op;        // ncclRedOp_t value, PreMulSum handles included
  int root;      // Reduce only
  void* stream;  // cudaStream_t (ignored on the CPU backend)
};

// Runs `call` when actorcc's core cannot take its dtype/op as they are (fp8 reductions,
// unsigned min/max/avg, PreMulSum handles) and returns true; returns false for a call the
// core takes natively (the caller runs it; ncclUint32/ncclUint64 sum and prod run as the core's
// Int32/Int64, whose wrapping arithmetic gives the same bits). Throws actorcc::Error
// (InvalidArgument naming the op or dtype where nothing can serve it).
bool run_adapted(Communicator& comm, AdaptState& st, const ReduceCall& call);

// ncclRedOpCreatePreMulSum / ncclRedOpDestroy; return ncclResult_t values and throw nothing.
int create_premul(AdaptState& st, int* op_out, void* scalar, int dtype, int residence);
int destroy_premul(AdaptState& st, int op);

}  // namespace actorcc::ncclabi
