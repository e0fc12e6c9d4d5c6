// actorcc._actorcc._Communicator: one rank of a group, for the Python layer
// (python/actorcc/communicator.py), which adds defaults (streams, outputs, async handles).
//
// Tensors arrive either as any DLPack / buffer-protocol object (numpy, cupy, jax, torch,
// imported through nb::ndarray without conversion: nothing is ever copied behind the caller's
// back) or, on the fast path the Python layer uses for torch tensors, as a raw descriptor
// tuple (ptr, count, dtype, dlpack_device_type, device_id). Every check (writable output,
// C-contiguous, supported and matching dtypes, device, sizes) runs before the C++ call, so a
// bad argument raises InvalidArgumentError before any data moves. The GIL is released around
// every call that may block.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "actorcc/actorcc.hpp"
#include "bindings.hpp"

namespace actorcc::py {
namespace {

constexpr int kDevCPU = 1, kDevCUDA = 2, kDevCUDAHost = 3, kDevCUDAManaged = 13;

std::string device_name(int type, int id) {
  switch (type) {
    case kDevCPU: return "cpu";
    case kDevCUDA: return "cuda:" + std::to_string(id);
    case kDevCUDAHost: return "cuda_host (pinned)";
    case kDevCUDAManaged: return "cuda_managed:" + std::to_string(id);
    default: return "dlpack device type " + std::to_string(type);
  }
}

// One tensor argument, resolved.
struct Buf {
  void* ptr = nullptr;
  size_t count = 0;
  DataType dtype = DataType::Float32;
  int dev_type = kDevCPU;
  int dev_id = 0;
  nb::ndarray<nb::ro> keep;  // holds the DLPack import alive while the call runs
};

bool map_dlpack_dtype(nb::dlpack::dtype t, DataType& out) {
  using C = nb::dlpack::dtype_code;
  if (t.lanes != 1) return false;
  switch (static_cast<C>(t.code)) {
    case C::Float:
      if (t.bits == 32) return out = DataType::Float32, true;
      if (t.bits == 16) return out = DataType::Float16, true;
      if (t.bits == 64) return out = DataType::Float64, true;
      return false;
    case C::Bfloat:
      if (t.bits == 16) return out = DataType::BFloat16, true;
      return false;
    case C::Int:
      if (t.bits == 8) return out = DataType::Int8, true;
      if (t.bits == 32) return out = DataType::Int32, true;
      if (t.bits == 64) return out = DataType::Int64, true;
      return false;
    case C::UInt:
      if (t.bits == 8) return out = DataType::UInt8, true;
      return false;
    default: return false;
  }
}

std::string dlpack_dtype_name(nb::dlpack::dtype t) {
  static const char* names[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string n = t.code < 7 ? names[t.code] : "code" + std::to_string(t.code);
  // DLPack's bool is one byte; frameworks call it "bool", not "bool8".
  if (!(t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bool) && t.bits == 8)) n += std::to_string(t.bits);
  if (t.lanes != 1) n += "x" + std::to_string(t.lanes);
  return n;
}

const char* kSupported = "float32, float16, bfloat16, float64, int8, uint8, int32, int64";

// `dtype_override` >= 0 reinterprets the elements (the Python layer uses it for numpy arrays
// of ml_dtypes.bfloat16, which DLPack cannot describe; it passes a uint16 view).
Buf get_buf(nb::handle h, bool writable, const char* what, int rank, int dtype_override) {
  Buf b;
  if (PyTuple_Check(h.ptr())) {  // raw descriptor from the Python fast path (already checked there)
    auto t = nb::borrow<nb::tuple>(h);
    if (t.size() != 5) throw_invalid(std::string(what) + ": bad tensor descriptor", rank);
    b.ptr = reinterpret_cast<void*>(nb::cast<uintptr_t>(t[0]));
    b.count = nb::cast<size_t>(t[1]);
    int dt = nb::cast<int>(t[2]);
    if (dt < 0 || dt >= kNumDataTypes) throw_invalid(std::string(what) + ": unsupported dtype code", rank);
    b.dtype = static_cast<DataType>(dt);
    b.dev_type = nb::cast<int>(t[3]);
    b.dev_id = nb::cast<int>(t[4]);
    return b;
  }
  bool ok;
  if (writable) {
    nb::ndarray<> w;
    ok = nb::try_cast(h, w, /*convert=*/false);
    if (ok) {
      b.keep = nb::ndarray<nb::ro>(w);
    } else if (nb::try_cast(h, b.keep, false)) {
      throw_invalid(std::string(what) + " is read-only (it is written to)", rank);
    }
  } else {
    ok = nb::try_cast(h, b.keep, false);
  }
  if (!ok) {
    // An array type DLPack cannot describe (numpy object, datetime, string, structured) is
    // still an array: name its dtype, not only its type, so the user sees what to change.
    // (The failed import may leave the exporter's BufferError set: clear it first.)
    PyErr_Clear();
    if (nb::hasattr(h, "dtype") && nb::hasattr(h, "shape")) {
      nb::object dtype = h.attr("dtype");
      nb::object text = nb::steal(PyObject_Str(dtype.ptr()));
      const char* name = text.is_valid() ? PyUnicode_AsUTF8(text.ptr()) : nullptr;
      if (!name) PyErr_Clear();
      throw_invalid(std::string(what) + " has unsupported dtype " + (name ? name : "?") + " (" +
                        nb::type_name(h.type()).c_str() + "; supported: " + kSupported + ")",
                    rank);
    }
    throw_invalid(std::string(what) + ": expected a tensor/array supporting DLPack or the buffer protocol, got " +
                      nb::type_name(h.type()).c_str(),
                  rank);
  }
  const auto& a = b.keep;
  // C-contiguous (any strides on dimensions of size 1; anything with <= 1 element).
  if (a.size() > 1 && a.stride_ptr() != nullptr) {
    int64_t expect = 1;
    for (int64_t i = static_cast<int64_t>(a.ndim()) - 1; i >= 0; --i) {
      if (a.shape(i) != 1 && a.stride(i) != expect)
        throw_invalid(std::string(what) + " is not contiguous (strides do not describe a dense C-order array); "
                                          "pass a contiguous tensor (e.g. .contiguous() / numpy.ascontiguousarray)",
                      rank);
      expect *= a.shape(i);
    }
  }
  if (dtype_override >= 0) {
    if (dtype_override >= kNumDataTypes) throw_invalid(std::string(what) + ": bad dtype override", rank);
    b.dtype = static_cast<DataType>(dtype_override);
    if (dtype_size(b.dtype) * 8 != a.dtype().bits) throw_invalid(std::string(what) + ": dtype override size mismatch", rank);
  } else if (!map_dlpack_dtype(a.dtype(), b.dtype)) {
    throw_invalid(std::string(what) + " has unsupported dtype " + dlpack_dtype_name(a.dtype()) + " (supported: " +
                      kSupported + ")",
                  rank);
  }
  b.ptr = const_cast<void*>(a.data());
  b.count = a.size();
  b.dev_type = a.device_type();
  b.dev_id = a.device_id();
  return b;
}

// Everything the binding keeps per communicator. The shared mutex lets calls (and abort) run
// concurrently with each other while close() waits for them to finish before destroying.
struct PyComm {
  std::unique_ptr<Communicator> c;
  std::shared_mutex mu;
  // Cached after construction (valid after close too).
  int rank = -1, world = 0, device = -1;
  Backend backend = Backend::Cpu;

  explicit PyComm(std::unique_ptr<Communicator> comm) : c(std::move(comm)) {
    rank = c->rank();
    world = c->world_size();
    device = c->device();
    backend = c->backend();
  }

  Communicator& get() {
    if (!c) throw Error(ErrorCode::InvalidArgument, "communicator is closed", rank);
    return *c;
  }

  void check_device(const Buf& b, const char* what) const {
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
};

// A validated call, ready to run (possibly on another thread: the Python layer's CPU worker).
struct Call {
  nb::object owner;  // the _Communicator (keeps PyComm alive)
  PyComm* pc = nullptr;
  Collective coll = Collective::AllReduce;
  Buf send, recv;
  size_t count = 0;
  RedOp op = RedOp::Sum;
  int root = 0;
  Stream stream = nullptr;
  bool done = false;
  // Send / Recv: the peer (in `root`). SendRecv: the batch, and its tensors kept alive.
  // AllToAllV: the per-peer counts.
  std::vector<P2POp> ops;
  std::vector<Buf> op_bufs;
  std::vector<size_t> in_counts, out_counts;

  void run() {
    if (done) throw_invalid("this call has already run", pc->rank);
    done = true;
    nb::gil_scoped_release nogil;
    std::shared_lock lock(pc->mu);
    Communicator& c = pc->get();
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
};

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
      call.send = get(send_h, false, "tensor");
      call.count = call.send.count;
      if (root) {
        if (recv_h.is_none()) throw_invalid("gather: the root needs an output tensor (out=)", r);
        call.recv = get(recv_h, true, "output tensor");
        same_kind(call.send, call.recv);
        size_is(call.recv, call.count * w, "output", "world_size * input = " + std::to_string(w) + " * " + std::to_string(call.count));
      }
      return;
    case Collective::Scatter:
      call.recv = get(recv_h, true, "output tensor");
      call.count = call.recv.count;
      if (root) {
        if (send_h.is_none()) throw_invalid("scatter: the root needs an input tensor", r);
        call.send = get(send_h, false, "input tensor");
        same_kind(call.send, call.recv);
        size_is(call.send, call.count * w, "input", "world_size * output = " + std::to_string(w) + " * " + std::to_string(call.count));
      }
      return;
    default: throw_invalid("bad collective code", r);
  }
}


// Resolves and checks every argument; throws InvalidArgument before anything moves.
Call prepare(nb::handle self, int coll_code, nb::handle send_h, nb::handle recv_h, int op_code, int root,
             uintptr_t stream, int dtype_override, nb::handle in_counts = nb::none(), nb::handle out_counts = nb::none()) {
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

Options make_options(const std::string& backend, int device, nb::handle timeout_s, nb::handle join_timeout_s,
                     const std::string& algo, bool checked, size_t workspace_bytes) {
  Options o;
  o.backend = parse_backend(backend);
  o.device = device;
  auto ms = [](nb::handle h, const char* name) {
    return timeout_from_seconds(nb::cast<double>(h), name);  // inf = no limit; < 1 ms rounds up
  };
  if (!timeout_s.is_none()) o.timeout = ms(timeout_s, "timeout");
  if (!join_timeout_s.is_none()) o.join_timeout = ms(join_timeout_s, "join_timeout");
  o.algo = algo;
  o.checked = checked;
  o.workspace_bytes = workspace_bytes;
  return o;
}

nb::dict peer_dict(const PeerInfo& p) {
  nb::dict d;
  d["rank"] = p.rank;
  d["host_id"] = p.host_id;
  d["hostname"] = p.hostname;
  d["pid"] = p.pid;
  d["gpu_uuid"] = p.gpu_uuid;
  d["pci_bus_id"] = p.pci_bus_id;
  d["node"] = p.node;
  d["local_rank"] = p.local_rank;
  d["visible_devices"] = p.visible_devices;
  d["version"] = p.version;
  return d;
}

}  // namespace

void bind_communicator(nb::module_& m) {
  nb::class_<Call>(m, "_Call", "A validated collective call (internal: run() executes it, releasing the GIL).")
      .def("run", &Call::run);

  nb::class_<PyComm>(m, "_Communicator")
      .def(
          "__init__",
          [](PyComm* self, const UniqueId& id, int rank, int world_size, const std::string& backend, int device,
             nb::handle timeout, nb::handle join_timeout, const std::string& algo, bool checked, size_t workspace_bytes) {
            Options o = make_options(backend, device, timeout, join_timeout, algo, checked, workspace_bytes);
            std::unique_ptr<Communicator> c;
            {
              nb::gil_scoped_release nogil;  // joining waits for every rank (bounded by join_timeout)
              c = std::make_unique<Communicator>(id, rank, world_size, o);
            }
            new (self) PyComm(std::move(c));
          },
          nb::arg("uid"), nb::arg("rank"), nb::arg("world_size"), nb::arg("backend") = "auto", nb::arg("device") = -1,
          nb::arg("timeout").none() = nb::none(), nb::arg("join_timeout").none() = nb::none(), nb::arg("algo") = "",
          nb::arg("checked") = false, nb::arg("workspace_bytes") = 0)
      .def_static(
          "from_address",
          [](const std::string& host, int port, int rank, int world_size, const std::string& backend, int device,
             nb::handle timeout, nb::handle join_timeout, const std::string& algo, bool checked, size_t workspace_bytes) {
            if (port <= 0 || port > 65535) throw_invalid("port must be in 1..65535, got " + std::to_string(port), rank);
            Options o = make_options(backend, device, timeout, join_timeout, algo, checked, workspace_bytes);
            std::unique_ptr<Communicator> c;
            {
              nb::gil_scoped_release nogil;
              c = Communicator::from_address(host, static_cast<uint16_t>(port), rank, world_size, o);
            }
            return new PyComm(std::move(c));
          },
          nb::arg("host"), nb::arg("port"), nb::arg("rank"), nb::arg("world_size"), nb::arg("backend") = "auto",
          nb::arg("device") = -1, nb::arg("timeout").none() = nb::none(), nb::arg("join_timeout").none() = nb::none(),
          nb::arg("algo") = "", nb::arg("checked") = false, nb::arg("workspace_bytes") = 0,
          nb::rv_policy::take_ownership)
      .def_prop_ro("rank", [](PyComm& p) { return p.rank; })
      .def_prop_ro("world_size", [](PyComm& p) { return p.world; })
      .def_prop_ro("device", [](PyComm& p) { return p.device; })
      .def_prop_ro("backend", [](PyComm& p) { return std::string(to_string(p.backend)); })
      .def_prop_ro("num_nodes", [](PyComm& p) { return p.get().num_nodes(); })
      .def_prop_ro("peers",
                   [](PyComm& p) {
                     nb::list l;
                     for (const auto& pi : p.get().peers()) l.append(peer_dict(pi));
                     return l;
                   })
      .def_prop_ro("closed", [](PyComm& p) { return !p.c; })
      .def_prop_ro("aborted", [](PyComm& p) { return p.c ? p.c->aborted() : false; })
      .def(
          "plan",
          [](PyComm& p, const std::string& coll, size_t bytes, bool registered) {
            return p.get().plan(parse_collective(coll), bytes, registered);
          },
          nb::arg("collective"), nb::arg("nbytes"), nb::arg("registered") = false)
      // The one entry for every collective: validates, then runs now (run=True, returns None)
      // or returns a _Call to run later (the Python layer's async CPU worker).
      .def(
          "call",
          [](nb::handle self, int coll, nb::handle send, nb::handle recv, int op, int root, uintptr_t stream,
             int dtype_override, bool run, nb::handle in_counts, nb::handle out_counts) -> nb::object {
            Call c = prepare(self, coll, send, recv, op, root, stream, dtype_override, in_counts, out_counts);
            if (run) {
              c.run();
              return nb::none();
            }
            return nb::cast(std::move(c));
          },
          nb::arg("coll"), nb::arg("send").none(), nb::arg("recv").none(), nb::arg("op") = 0, nb::arg("root") = 0,
          nb::arg("stream") = 0, nb::arg("dtype_override") = -1, nb::arg("run") = true,
          nb::arg("in_counts").none() = nb::none(), nb::arg("out_counts").none() = nb::none())
      // A batch of sends and receives issued as one: ops is a list of (is_send, tensor, peer,
      // dtype_override). Validated here; runs now or returns a _Call like `call`.
      .def(
          "call_batch",
          [](nb::handle self, nb::list ops, uintptr_t stream, bool run) -> nb::object {
            PyComm& pc = nb::cast<PyComm&>(self);
            pc.get();
            Call call;
            call.owner = nb::borrow(self);
            call.pc = &pc;
            call.coll = Collective::SendRecv;
            call.stream = reinterpret_cast<Stream>(stream);
            for (size_t i = 0; i < ops.size(); ++i) {
              auto t = nb::cast<nb::tuple>(ops[i]);
              if (t.size() != 4) throw_invalid("send_recv: op " + std::to_string(i) + " is not (is_send, tensor, peer, dtype)", pc.rank);
              const bool is_send = nb::cast<bool>(t[0]);
              const int peer = nb::cast<int>(t[2]);
              const std::string what = "op " + std::to_string(i) + (is_send ? " (send) tensor" : " (recv) tensor");
              if (peer < 0 || peer >= pc.world)
                throw_invalid("send_recv: " + what + ": peer " + std::to_string(peer) + " is outside the group of " +
                                  std::to_string(pc.world),
                              pc.rank);
              Buf b = get_buf(t[1], !is_send, what.c_str(), pc.rank, nb::cast<int>(t[3]));
              pc.check_device(b, what.c_str());
              call.ops.push_back({is_send ? P2POp::Kind::Send : P2POp::Kind::Recv, b.ptr, b.count, b.dtype, peer});
              call.op_bufs.push_back(std::move(b));
            }
            if (run) {
              call.run();
              return nb::none();
            }
            return nb::cast(std::move(call));
          },
          nb::arg("ops"), nb::arg("stream") = 0, nb::arg("run") = true)
      // The hot path of the Python layer for torch tensors: an in-place all_reduce/broadcast of
      // a tensor given as (ptr, count, dtype, device type, device id), already checked for
      // contiguity and dtype there. No tuple, no DLPack import.
      .def(
          "call_inplace",
          [](nb::handle self, int coll, uintptr_t ptr, size_t count, int dtype, int dev_type, int dev_id, int op,
             int root, uintptr_t stream) {
            PyComm& pc = nb::cast<PyComm&>(self);
            if (coll != static_cast<int>(Collective::AllReduce) && coll != static_cast<int>(Collective::Broadcast))
              throw_invalid("call_inplace: all_reduce or broadcast only", pc.rank);
            if (dtype < 0 || dtype >= kNumDataTypes) throw_invalid("unsupported dtype code", pc.rank);
            if (op < 0 || op >= kNumRedOps) throw_invalid("unsupported reduction op code " + std::to_string(op), pc.rank);
            if (root < 0 || root >= pc.world)
              throw_invalid("broadcast: root " + std::to_string(root) + " is outside the group of " +
                                std::to_string(pc.world),
                            pc.rank);
            Buf b;
            b.ptr = reinterpret_cast<void*>(ptr);
            b.count = count;
            b.dtype = static_cast<DataType>(dtype);
            b.dev_type = dev_type;
            b.dev_id = dev_id;
            pc.check_device(b, "tensor");
            nb::gil_scoped_release nogil;
            std::shared_lock lock(pc.mu);
            Communicator& c = pc.get();
            if (coll == static_cast<int>(Collective::AllReduce))
              c.all_reduce(b.ptr, b.ptr, count, b.dtype, static_cast<RedOp>(op), reinterpret_cast<Stream>(stream));
            else
              c.broadcast(b.ptr, b.ptr, count, b.dtype, root, reinterpret_cast<Stream>(stream));
          },
          nb::arg("coll"), nb::arg("ptr"), nb::arg("count"), nb::arg("dtype"), nb::arg("dev_type"), nb::arg("dev_id"),
          nb::arg("op") = 0, nb::arg("root") = 0, nb::arg("stream") = 0)
      .def(
          "register_buffer",
          [](PyComm& p, uintptr_t ptr, size_t nbytes) {
            nb::gil_scoped_release nogil;  // collective
            std::shared_lock lock(p.mu);
            p.get().register_buffer(reinterpret_cast<void*>(ptr), nbytes);
          },
          nb::arg("ptr"), nb::arg("nbytes"))
      .def(
          "deregister_buffer",
          [](PyComm& p, uintptr_t ptr) {
            nb::gil_scoped_release nogil;
            std::shared_lock lock(p.mu);
            p.get().deregister_buffer(reinterpret_cast<void*>(ptr));
          },
          nb::arg("ptr"))
      .def(
          "allgather_bytes",
          [](PyComm& p, nb::bytes blob) {
            std::string in(blob.c_str(), blob.size());
            std::vector<std::string> out;
            {
              nb::gil_scoped_release nogil;
              std::shared_lock lock(p.mu);
              out = p.get().allgather_bytes(in);
            }
            nb::list l;
            for (const auto& s : out) l.append(nb::bytes(s.data(), s.size()));
            return l;
          },
          nb::arg("blob"), "Every rank's blob (bytes), indexed by rank, over the bootstrap network.")
      .def("host_barrier",
           [](PyComm& p) {
             nb::gil_scoped_release nogil;
             std::shared_lock lock(p.mu);
             p.get().host_barrier();
           })
      .def("check",
           [](PyComm& p) {
             std::shared_lock lock(p.mu);
             p.get().check();
           })
      .def(
          "synchronize",
          [](PyComm& p, uintptr_t stream) {
            nb::gil_scoped_release nogil;  // waits for the device
            std::shared_lock lock(p.mu);
            p.get().synchronize(reinterpret_cast<Stream>(stream));
          },
          nb::arg("stream") = 0)
      .def(
          "abort",
          [](PyComm& p, const std::string& reason) {
            nb::gil_scoped_release nogil;
            std::shared_lock lock(p.mu);
            if (p.c) p.c->abort(reason);
          },
          nb::arg("reason") = "abort() called")
      .def("close", [](PyComm& p) {
        nb::gil_scoped_release nogil;  // waits for running calls, then says goodbye to the root
        std::unique_lock lock(p.mu);
        p.c.reset();
      });
}

}  // namespace actorcc::py
