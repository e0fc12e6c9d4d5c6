// ncclRedOpCreatePreMulSum / ncclRedOpDestroy: the ops live in the comm's adapter state
// (adapt.hpp), which also runs the reductions that use them.
#include "comm.hpp"

using namespace actorcc::ncclabi;

namespace {
ncclResult_t adapt_result(ncclComm* comm, int code, const char* fn, const std::string& what) noexcept {
  if (code == ncclSuccess) return ncclSuccess;
  return set_error(comm, static_cast<ncclResult_t>(code), std::string(fn) + ": " + rank_prefix(comm) + what);
}
}  // namespace

extern "C" ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                 ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* fn = "ncclRedOpCreatePreMulSum";
  ncclResult_t rc = ncclSuccess;
  if (!ready_core(comm, fn, &rc)) return rc;
  if (!op || !scalar) return set_error(comm, ncclInvalidArgument, std::string(fn) + ": " + rank_prefix(comm) + "op or scalar is NULL");
  int out = 0;
  const int code = create_premul(*comm->adapt, &out, scalar, datatype, residence);
  if (code == ncclSuccess) *op = static_cast<ncclRedOp_t>(out);
  return adapt_result(comm, code, fn,
                      std::string(code == ncclInvalidUsage ? "PreMulSum ops are not available in this build"
                                                           : "PreMulSum refused: the dtype or scalar is not valid") +
                          " (ncclDataType_t " + std::to_string(datatype) + ", residence " + std::to_string(residence) + ")");
}
ACTORCC_NCCL_ALIAS(ncclRedOpCreatePreMulSum)

extern "C" ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  const char* fn = "ncclRedOpDestroy";
  ncclResult_t rc = ncclSuccess;
  if (!ready_core(comm, fn, &rc)) return rc;
  if (op < ncclNumOps)
    return set_error(comm, ncclInvalidArgument, std::string(fn) + ": " + rank_prefix(comm) + "op " + std::to_string(op) +
                                                    " is a built-in op, not one made by ncclRedOpCreatePreMulSum");
  return adapt_result(comm, destroy_premul(*comm->adapt, op), fn,
                      "op " + std::to_string(op) + " is not a PreMulSum op of this communicator");
}
ACTORCC_NCCL_ALIAS(ncclRedOpDestroy)
