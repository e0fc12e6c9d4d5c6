#include "call.hpp"
#include "interrupt.hpp"

#include <string>

namespace actorcc::py {
namespace {

std::vector<size_t> count_list(nb::handle h, const char* what, size_t world, int rank) {
  if (h.is_none()) throw_invalid(std::string("all_to_all_v: ") + what + " is required", rank);
  std::vector<size_t> v;
  for (nb::handle x : h) {
    const auto c = nb::cast<int64_t>(x);
    if (c < 0) throw_invalid(std::string("all_to_all_v: ") + what + " has a negative count " + std::to_string(c), rank);
    v.push_back(static_cast<size_t>(c));
  }
  if (v.size() != world)
    throw_invalid(std::string("all_to_all_v: ") + what + " has " + std::to_string(v.size()) + " entries, need world_size = " +
                      std::to_string(world),
                  rank);
  return v;
}

size_t sum_of(const std::vector<size_t>& v) {
  size_t s = 0;
  for (size_t x : v) s += x;
  return s;
}

// The calls added with point-to-point: a buffer may be absent where the call does not use it
// (gather's output and scatter's input off the root), and sizes relate by world_size or by
// the per-peer counts. `root` is the peer for send and recv.
void prepare_more(Call& call, PyComm& pc, nb::handle send_h, nb::handle recv_h, int dtype_override, nb::handle in_counts,
                  nb::handle out_counts) {
  const int r = pc.rank;
  const size_t w = static_cast<size_t>(pc.world);
  const Collective c = call.coll;
  const char* name = to_string(c).data();
  const bool rooted = c == Collective::Reduce || c == Collective::Gather || c == Collective::Scatter;
  if (rooted && (call.root < 0 || call.root >= pc.world))
    throw_invalid(std::string(name) + ": root " + std::to_string(call.root) + " is outside the group of " +
                      std::to_string(pc.world),
                  r);
  if ((c == Collective::Send || c == Collective::Recv) && (call.root < 0 || call.root >= pc.world || call.root == r))
    throw_invalid(std::string(name) + ": peer " + std::to_string(call.root) + " is not another rank of this group of " +
                      std::to_string(pc.world),
                  r);
  const bool root = call.root == r;
  auto get = [&](nb::handle h, bool writable, const char* what) {
    Buf b = get_buf(h, writable, what, r, dtype_override);
    pc.check_device(b, what);
    return b;
  };
  auto same_kind = [&](const Buf& a, const Buf& b) {
    if (a.dtype != b.dtype)
      throw_invalid(std::string(name) + ": dtype mismatch: input is " + std::string(to_string(a.dtype)) + ", output is " +
                        std::string(to_string(b.dtype)),
                    r);
  };
  auto size_is = [&](const Buf& b, size_t want, const char* what, const std::string& rule) {
    if (b.count != want)
      throw_invalid(std::string(name) + ": " + what + " must have " + rule + " = " + std::to_string(want) +
                        " elements, got " + std::to_string(b.count),
                    r);
  };
  switch (c) {
    case Collective::Send:
      call.send = get(send_h, false, "tensor");
      call.count = call.send.count;
      return;
    case Collective::Recv:
      call.recv = get(recv_h, true, "tensor");
      call.count = call.recv.count;
      return;
    case Collective::AllToAll:
    case Collective::AllToAllV:
      if (send_h.is_none() || recv_h.is_none() || send_h.is(recv_h))
        throw_invalid(std::string(name) + ": needs an input and a separate output tensor", r);
      call.send = get(send_h, false, "input tensor");
      call.recv = get(recv_h, true, "output tensor");
      same_kind(call.send, call.recv);
      if (c == Collective::AllToAll) {
        if (call.send.count % w)
          throw_invalid("all_to_all: input of " + std::to_string(call.send.count) + " elements does not split into " +
                            std::to_string(w) + " equal blocks",
                        r);
        size_is(call.recv, call.send.count, "output", "the input's size");
        call.count = call.send.count / w;
      } else {
        call.in_counts = count_list(in_counts, "in_counts", w, r);
        call.out_counts = count_list(out_counts, "out_counts", w, r);
        size_is(call.send, sum_of(call.in_counts), "input", "sum(in_counts)");
        size_is(call.recv, sum_of(call.out_counts), "output", "sum(out_counts)");
      }
      return;
    case Collective::Reduce:  // in place: the root's tensor receives the result
      call.send = get(send_h, root, "tensor");
      call.recv = call.send;
      call.count = call.send.count;
      return;
    case Collective::Gather:
    case Collective::Scatter: {
      // Mirror images: gather's per-rank input and the root's output of world_size of them;
      // scatter's per-rank output and the root's input of world_size of them.
      const bool gather = c == Collective::Gather;
      Buf& part = gather ? call.send : call.recv;
      Buf& whole = gather ? call.recv : call.send;
      const char* part_side = gather ? "input" : "output";
      const char* whole_side = gather ? "output" : "input";
      part = get(gather ? send_h : recv_h, !gather, gather ? "tensor" : "output tensor");
      call.count = part.count;
      if (root) {
        if ((gather ? recv_h : send_h).is_none())
          throw_invalid(gather ? "gather: the root needs an output tensor (out=)" : "scatter: the root needs an input tensor", r);
        whole = get(gather ? recv_h : send_h, gather, gather ? "output tensor" : "input tensor");
        same_kind(call.send, call.recv);
        size_is(whole, call.count * w, whole_side,
                std::string("world_size * ") + part_side + " = " + std::to_string(w) + " * " + std::to_string(call.count));
      }
      return;
    }
    default: throw_invalid("bad collective code", r);
  }
}

}  // namespace

void PyComm::check_device(const Buf& b, const char* what) const {
  if (backend == Backend::Cpu) {
    if (b.dev_type != kDevCPU && b.dev_type != kDevCUDAHost && b.dev_type != kDevCUDAManaged)
      throw_invalid(std::string(what) + " is on " + device_name(b.dev_type, b.dev_id) +
                        " but this communicator uses the CPU backend (host memory only)",
                    rank);
  } else {
    if (b.dev_type == kDevCPU || b.dev_type == kDevCUDAHost)
      throw_invalid(std::string(what) + " is a host array (" + device_name(b.dev_type, b.dev_id) +
                        "); host arrays are accepted only on the CPU backend, this communicator uses cuda:" +
                        std::to_string(device) + " (create it with backend='cpu' for host arrays)",
                    rank);
    if ((b.dev_type != kDevCUDA && b.dev_type != kDevCUDAManaged) || b.dev_id != device)
      throw_invalid(std::string(what) + " is on " + device_name(b.dev_type, b.dev_id) +
                        " but this communicator uses cuda:" + std::to_string(device),
                    rank);
  }
}

void Call::run() {
  if (done) throw_invalid("this call has already run", pc->rank);
  done = true;
  interruptible([this] { run_unlocked(); });
}

void Call::run_unlocked() {
  std::shared_lock lock(pc->mu);
  Communicator& c = pc->get();
  Interruptible ctrl_c([&c] { c.abort(kInterruptReason); });
  switch (coll) {
    case Collective::AllReduce: c.all_reduce(send.ptr, recv.ptr, count, send.dtype, op, stream); break;
    case Collective::ReduceScatter: c.reduce_scatter(send.ptr, recv.ptr, count, send.dtype, op, stream); break;
    case Collective::AllGather: c.all_gather(send.ptr, recv.ptr, count, send.dtype, stream); break;
    case Collective::Broadcast: c.broadcast(send.ptr, recv.ptr, count, send.dtype, root, stream); break;
    case Collective::Barrier: c.barrier(stream); break;
    case Collective::Send: c.send(send.ptr, count, send.dtype, root, stream); break;
    case Collective::Recv: c.recv(recv.ptr, count, recv.dtype, root, stream); break;
    case Collective::SendRecv: c.send_recv(ops, stream); break;
    case Collective::AllToAll: c.all_to_all(send.ptr, recv.ptr, count, send.dtype, stream); break;
    case Collective::AllToAllV: c.all_to_all_v(send.ptr, in_counts, recv.ptr, out_counts, send.dtype, stream); break;
    case Collective::Reduce: c.reduce(send.ptr, recv.ptr, count, send.dtype, op, root, stream); break;
    case Collective::Gather: c.gather(send.ptr, recv.ptr, count, send.dtype, root, stream); break;
    case Collective::Scatter: c.scatter(send.ptr, recv.ptr, count, recv.dtype, root, stream); break;
  }
}

Call prepare(nb::handle self, int coll_code, nb::handle send_h, nb::handle recv_h, int op_code, int root,
             uintptr_t stream, int dtype_override, nb::handle in_counts, nb::handle out_counts) {
  PyComm& pc = nb::cast<PyComm&>(self);
  pc.get();  // closed?
  int r = pc.rank;
  // SendRecv (a batch) has its own entry point (send_recv below), not this one.
  if (coll_code < 0 || to_string(static_cast<Collective>(coll_code)) == "invalid" ||
      coll_code == static_cast<int>(Collective::SendRecv))
    throw_invalid("bad collective code " + std::to_string(coll_code), r);
  Call call;
  call.owner = nb::borrow(self);
  call.pc = &pc;
  call.coll = static_cast<Collective>(coll_code);
  call.stream = reinterpret_cast<Stream>(stream);
  if (call.coll == Collective::Barrier) return call;
  if (op_code < 0 || op_code >= kNumRedOps) throw_invalid("unsupported reduction op code " + std::to_string(op_code), r);
  call.op = static_cast<RedOp>(op_code);
  call.root = root;
  if (coll_code > static_cast<int>(Collective::Barrier)) {
    prepare_more(call, pc, send_h, recv_h, dtype_override, in_counts, out_counts);
    return call;
  }

  const bool in_place = recv_h.is(send_h) || recv_h.is_none();
  call.send = get_buf(send_h, /*writable=*/in_place, in_place ? "tensor" : "input tensor", r, dtype_override);
  pc.check_device(call.send, in_place ? "tensor" : "input tensor");
  if (in_place) {
    call.recv = call.send;
  } else {
    call.recv = get_buf(recv_h, /*writable=*/true, "output tensor", r, dtype_override);
    pc.check_device(call.recv, "output tensor");
    if (call.recv.dtype != call.send.dtype)
      throw_invalid("dtype mismatch: input is " + std::string(to_string(call.send.dtype)) + ", output is " +
                        std::string(to_string(call.recv.dtype)),
                    r);
    if (call.recv.dev_type != call.send.dev_type || call.recv.dev_id != call.send.dev_id)
      throw_invalid("input and output tensors are on different devices", r);
  }
  const size_t in = call.send.count, out = call.recv.count, w = static_cast<size_t>(pc.world);
  switch (call.coll) {
    case Collective::AllReduce:
    case Collective::Broadcast:
      if (in != out)
        throw_invalid(std::string(to_string(call.coll)) + ": input has " + std::to_string(in) + " elements but output has " +
                          std::to_string(out),
                      r);
      call.count = in;
      if (call.coll == Collective::Broadcast && (root < 0 || root >= pc.world))
        throw_invalid("broadcast: root " + std::to_string(root) + " is outside the group of " + std::to_string(pc.world), r);
      break;
    case Collective::AllGather:
      if (in_place) throw_invalid("all_gather: the output must be a separate tensor of world_size * input elements", r);
      if (out != in * w)
        throw_invalid("all_gather: output must have world_size * input = " + std::to_string(w) + " * " + std::to_string(in) +
                          " = " + std::to_string(in * w) + " elements, got " + std::to_string(out),
                      r);
      call.count = in;
      break;
    case Collective::ReduceScatter:
      if (in_place) throw_invalid("reduce_scatter: the output must be a separate tensor of input / world_size elements", r);
      if (in != out * w)
        throw_invalid("reduce_scatter: input must have world_size * output = " + std::to_string(w) + " * " +
                          std::to_string(out) + " = " + std::to_string(out * w) + " elements, got " + std::to_string(in),
                      r);
      call.count = out;
      break;
    default: break;
  }
  return call;
}

}  // namespace actorcc::py
