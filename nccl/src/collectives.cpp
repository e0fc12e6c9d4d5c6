// The collectives: ncclAllReduce, ncclReduceScatter, ncclReduce, ncclAllGather, ncclBroadcast,
// ncclBcast, ncclAlltoAll, ncclGather, ncclScatter, and 2.31's nccl*Config forms, which the plain
// ones are with a NULL config (as in NCCL). Each is one CollCall, run now or deferred to the
// group's end. A reducing call goes to the reduction adapters first (adapt.hpp: fp8,
// unsigned min/max/avg, PreMulSum); what they decline maps onto the core's dtypes and ops.
// Calls that only move bytes take every dtype.
#include "comm.hpp"

namespace actorcc::ncclabi {

namespace {

constexpr const char* kNames[] = {"ncclAllReduce", "ncclReduceScatter", "ncclReduce", "ncclAllGather",
                                  "ncclBroadcast", "ncclAlltoAll",      "ncclGather", "ncclScatter"};

// How each ncclDataType_t maps onto the core. Unsigned 32/64-bit integers sum and multiply
// bitwise like the signed ones (two's complement wraps the same), so those two ops run as
// int32/int64; their min/max/avg are the adapters' (or refused). fp8 types move as bytes.
struct TypeRow {
  DataType core;
  bool reduce_all_ops;  // every built-in op natively
  bool reduce_sum_prod; // sum and prod natively
};
constexpr TypeRow kTypes[ncclNumTypes] = {
    {DataType::Int8, true, true},      {DataType::UInt8, true, true},    {DataType::Int32, true, true},
    {DataType::Int32, false, true},    {DataType::Int64, true, true},    {DataType::Int64, false, true},
    {DataType::Float16, true, true},   {DataType::Float32, true, true},  {DataType::Float64, true, true},
    {DataType::BFloat16, true, true},  {DataType::UInt8, false, false},  {DataType::UInt8, false, false},
};
constexpr RedOp kOps[ncclNumOps] = {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg};
constexpr const char* kOpNames[ncclNumOps] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};

[[noreturn]] void refuse(Communicator& c, const std::string& what) {
  c.refuse_call(InvalidArgument(what, c.rank()));
}

DataType reduce_dtype(Communicator& c, int dtype, int op, const char* fn) {
  if (const std::string bad = unknown_dtype(dtype); !bad.empty()) refuse(c, std::string(fn) + ": " + bad);
  if (op < 0 || op >= ncclNumOps)
    refuse(c, std::string(fn) + ": reduction op " + std::to_string(op) +
                  " is neither a built-in op nor a PreMulSum op of this communicator");
  const TypeRow& row = kTypes[dtype];
  if (row.reduce_all_ops || (row.reduce_sum_prod && op <= ncclProd)) return row.core;
  refuse(c, std::string(fn) + ": " + kOpNames[op] + " on ncclDataType_t " + std::to_string(dtype) +
                " is not available in this build");
}

}  // namespace

std::string unknown_dtype(int dtype) {
  if (dtype >= 0 && dtype < ncclNumTypes) return {};
  return "unknown ncclDataType_t " + std::to_string(dtype);
}

DataType bytes_dtype(int dtype, const char* fn, int rank) {
  if (const std::string bad = unknown_dtype(dtype); !bad.empty()) throw InvalidArgument(std::string(fn) + ": " + bad, rank);
  return kTypes[dtype].core;
}

namespace {
void run_call(Communicator& c, ncclComm* comm, const CollCall& k) {
  const char* fn = kNames[static_cast<int>(k.kind)];
  switch (k.kind) {
    case CollKind::AllReduce:
    case CollKind::ReduceScatter:
    case CollKind::Reduce: {
      const ReduceKind rk = k.kind == CollKind::AllReduce       ? ReduceKind::AllReduce
                            : k.kind == CollKind::ReduceScatter ? ReduceKind::ReduceScatter
                                                                : ReduceKind::Reduce;
      if (run_adapted(c, *comm->adapt, ReduceCall{rk, k.send, k.recv, k.count, k.dtype, k.op, k.root, k.stream}))
        return;
      const DataType t = reduce_dtype(c, k.dtype, k.op, fn);
      const RedOp op = kOps[k.op];
      if (rk == ReduceKind::AllReduce) c.all_reduce(k.send, k.recv, k.count, t, op, k.stream);
      else if (rk == ReduceKind::ReduceScatter) c.reduce_scatter(k.send, k.recv, k.count, t, op, k.stream);
      else c.reduce(k.send, k.recv, k.count, t, op, k.root, k.stream);
      return;
    }
    default: break;
  }
  DataType t;
  try {
    t = bytes_dtype(k.dtype, fn, c.rank());
  } catch (const InvalidArgument& e) {
    c.refuse_call(e);
  }
  switch (k.kind) {
    case CollKind::AllGather: c.all_gather(k.send, k.recv, k.count, t, k.stream); return;
    case CollKind::Broadcast: c.broadcast(k.send, k.recv, k.count, t, k.root, k.stream); return;
    case CollKind::AllToAll: {
      // NCCL takes an in-place all-to-all (nccl-tests runs one); the core needs the two buffers
      // apart, so an overlapping input is staged in a copy on the call's stream first.
      const size_t bytes = k.count * static_cast<size_t>(c.world_size()) * dtype_size(t);
      const auto* s = static_cast<const uint8_t*>(k.send);
      const auto* r = static_cast<const uint8_t*>(k.recv);
      if (bytes > 0 && s < r + bytes && r < s + bytes) {
        StagedInput copy(k.send, bytes, k.stream, comm->cuda_device, c.rank());
        c.all_to_all(copy.get(), k.recv, k.count, t, k.stream);
      } else {
        c.all_to_all(k.send, k.recv, k.count, t, k.stream);
      }
      return;
    }
    case CollKind::Gather: c.gather(k.send, k.recv, k.count, t, k.root, k.stream); return;
    case CollKind::Scatter: c.scatter(k.send, k.recv, k.count, t, k.root, k.stream); return;
    default: return;
  }
}

}  // namespace

void run_coll(Communicator& c, ncclComm* comm, const CollCall& k) {
  run_call(c, comm, k);
  if (k.done_event) record_event(k.done_event, k.stream, c.rank());
}

namespace {
// Runs `call` now, or defers it when a group is open on this thread. A bad config is refused on
// this rank alone, before the comm is looked at (NCCL checks it locally too), and the group it was
// issued in is left as it was.
ncclResult_t issue(ncclComm* comm, CollCall call, const ncclCollConfig_t* config, const char* fn) noexcept {
  try {
    if (const std::string bad = read_coll_config(config, &call); !bad.empty())
      return set_error(valid(comm) ? comm : nullptr, ncclInvalidArgument,
                       std::string(fn) + ": " + (valid(comm) ? rank_prefix(comm) : std::string()) + bad);
  } catch (...) {
    return fail_current(valid(comm) ? comm : nullptr, fn);
  }
  if (in_group()) {
    if (!valid(comm)) return bad_comm(fn, comm);
    return guarded(comm, fn, [&] {
      defer_coll(comm, call);
      return ncclSuccess;
    });
  }
  ncclResult_t rc = ncclSuccess;
  Communicator* c = ready_core(comm, fn, &rc);
  if (!c) return rc;
  BusyScope busy(comm, fn);
  try {
    run_coll(*c, comm, call);
    return ncclSuccess;
  } catch (...) {
    return fail_current(comm, fn);
  }
}
}  // namespace

}  // namespace actorcc::ncclabi

using namespace actorcc::ncclabi;

// Each collective's plain form and its 2.31 nccl*Config form: the same CollCall, with the config
// (NULL for the plain form) and the name its errors give.
#define ACTORCC_NCCL_COLL_PAIR(name, params, ...)                                              \
  extern "C" ncclResult_t name params { return issue(comm, __VA_ARGS__, nullptr, #name); }      \
  ACTORCC_NCCL_ALIAS(name)                                                                     \
  extern "C" ncclResult_t name##Config(ACTORCC_NCCL_UNPAREN params, const ncclCollConfig_t* config) { \
    return issue(comm, __VA_ARGS__, config, #name "Config");                                   \
  }                                                                                            \
  ACTORCC_NCCL_ALIAS(name##Config)
#define ACTORCC_NCCL_UNPAREN(...) __VA_ARGS__

ACTORCC_NCCL_COLL_PAIR(ncclAllReduce,
                       (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        ncclComm_t comm, cudaStream_t stream),
                       {CollKind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, stream})
ACTORCC_NCCL_COLL_PAIR(ncclReduceScatter,
                       (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                        ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
                       {CollKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, stream})
ACTORCC_NCCL_COLL_PAIR(ncclReduce,
                       (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream),
                       {CollKind::Reduce, sendbuff, recvbuff, count, datatype, op, root, stream})
ACTORCC_NCCL_COLL_PAIR(ncclAllGather,
                       (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                        ncclComm_t comm, cudaStream_t stream),
                       {CollKind::AllGather, sendbuff, recvbuff, sendcount, datatype, 0, 0, stream})
ACTORCC_NCCL_COLL_PAIR(ncclBroadcast,
                       (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream),
                       {CollKind::Broadcast, sendbuff, recvbuff, count, datatype, 0, root, stream})
ACTORCC_NCCL_COLL_PAIR(ncclAlltoAll,
                       (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclComm_t comm, cudaStream_t stream),
                       {CollKind::AllToAll, sendbuff, recvbuff, count, datatype, 0, 0, stream})
ACTORCC_NCCL_COLL_PAIR(ncclGather,
                       (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream),
                       {CollKind::Gather, sendbuff, recvbuff, count, datatype, 0, root, stream})
ACTORCC_NCCL_COLL_PAIR(ncclScatter,
                       (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream),
                       {CollKind::Scatter, sendbuff, recvbuff, count, datatype, 0, root, stream})

// The legacy in-place broadcast (no Config form).
extern "C" ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream) {
  return issue(comm, {CollKind::Broadcast, buff, buff, count, datatype, 0, root, stream}, nullptr, "ncclBcast");
}
ACTORCC_NCCL_ALIAS(ncclBcast)
