// ncclSend / ncclRecv. Inside a group they join the communicator's one send_recv batch (every op
// progresses at once, so a ring or a pairwise exchange completes); outside a group each is a
// batch of its own, as in NCCL (two ranks that both send first must group their calls).
#include "comm.hpp"

namespace actorcc::ncclabi {
namespace {

ncclResult_t issue_p2p(ncclComm* comm, P2POp::Kind kind, void* buf, size_t count, int dtype, int peer, void* stream,
                       const char* fn) noexcept {
  if (!valid(comm)) return bad_comm(fn, comm);
  return guarded(comm, fn, [&] {
    // The peer's matching call would wait for this one: a bad dtype must reach it.
    if (const std::string bad = unknown_dtype(dtype); !bad.empty()) return refuse_argument(comm, fn, bad);
    const P2POp op{kind, buf, count, bytes_dtype(dtype, fn, comm->rank), peer};
    if (in_group()) {
      defer_p2p(comm, op, stream);
      return ncclSuccess;
    }
    ncclResult_t rc = ncclSuccess;
    Communicator* c = ready_core(comm, fn, &rc);
    if (!c) return rc;
    BusyScope busy(comm, fn);
    if (kind == P2POp::Kind::Send) c->send(buf, count, op.dtype, peer, stream);
    else c->recv(buf, count, op.dtype, peer, stream);
    return ncclSuccess;
  });
}

}  // namespace
}  // namespace actorcc::ncclabi

using namespace actorcc;
using namespace actorcc::ncclabi;

extern "C" ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                 ncclComm_t comm, cudaStream_t stream) {
  return issue_p2p(comm, P2POp::Kind::Send, const_cast<void*>(sendbuff), count, datatype, peer, stream, "ncclSend");
}
ACTORCC_NCCL_ALIAS(ncclSend)

extern "C" ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                 cudaStream_t stream) {
  return issue_p2p(comm, P2POp::Kind::Recv, recvbuff, count, datatype, peer, stream, "ncclRecv");
}
ACTORCC_NCCL_ALIAS(ncclRecv)
