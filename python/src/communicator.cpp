// actorcc._actorcc._Communicator: one rank of a group, for the Python layer
// (python/actorcc/communicator.py), which adds defaults (streams, outputs, async handles).
//
// Tensors arrive either as any DLPack / buffer-protocol object (numpy, cupy, jax, torch,
// imported through nb::ndarray without conversion: nothing is ever copied behind the caller's
// back) or, on the fast path the Python layer uses for torch tensors, as a raw descriptor
// tuple (ptr, count, dtype, dlpack_device_type, device_id). Every check (writable output,
// C-contiguous, supported and matching dtypes, device, sizes) runs before the C++ call, so a
// bad argument raises InvalidArgumentError before any data moves. The GIL is released around
// every call that may block. Resolving a tensor: tensor_arg.cpp; checking and running a call:
// call.cpp; this file: the class and its methods.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "actorcc/actorcc.hpp"
#include "bindings.hpp"
#include "call.hpp"
#include "interrupt.hpp"
#include "tensor_arg.hpp"

namespace actorcc::py {
namespace {

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

// A blocking host-side step of the group (host_barrier, suspend, resume): the GIL released, and
// Ctrl-C aborting the group so the step, and the peers' in it, end at once.
void host_step(PyComm& p, void (Communicator::*step)()) {
  interruptible([&] {
    std::shared_lock lock(p.mu);
    Communicator& c = p.get();
    Interruptible ctrl_c([&c] { c.abort(kInterruptReason); });
    (c.*step)();
  });
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
            Options o;
            try {
              o = make_options(backend, device, timeout, join_timeout, algo, checked, workspace_bytes);
            } catch (const Error& e) {  // a bad option: the group learns it, as the constructor's own
              nb::gil_scoped_release nogil;
              Communicator::refuse_join(id, rank, world_size, e.message());
              throw;
            }
            std::unique_ptr<Communicator> c;
            interruptible([&] {  // joining waits for every rank (bounded by join_timeout)
              Interruptible ctrl_c([] { interrupt_constructions(kInterruptReason); });
              c = std::make_unique<Communicator>(id, rank, world_size, o);
            });
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
            interruptible([&] {
              Interruptible ctrl_c([] { interrupt_constructions(kInterruptReason); });
              c = Communicator::from_address(host, static_cast<uint16_t>(port), rank, world_size, o);
            });
            return new PyComm(std::move(c));
          },
          nb::arg("host"), nb::arg("port"), nb::arg("rank"), nb::arg("world_size"), nb::arg("backend") = "auto",
          nb::arg("device") = -1, nb::arg("timeout").none() = nb::none(), nb::arg("join_timeout").none() = nb::none(),
          nb::arg("algo") = "", nb::arg("checked") = false, nb::arg("workspace_bytes") = 0,
          nb::rv_policy::take_ownership)
      .def_static(
          "refuse_join",
          [](const UniqueId& id, int rank, int world_size, const std::string& reason, nb::handle join_timeout) {
            Options o;
            if (!join_timeout.is_none()) o.join_timeout = timeout_from_seconds(nb::cast<double>(join_timeout), "join_timeout");
            nb::gil_scoped_release nogil;  // connects to the root: up to a few seconds
            Communicator::refuse_join(id, rank, world_size, reason, o.join_timeout);
          },
          nb::arg("uid"), nb::arg("rank"), nb::arg("world_size"), nb::arg("reason"),
          nb::arg("join_timeout").none() = nb::none(),
          "Tells the group of `uid` that this process will not join it (a mistake the caller found "
          "before constructing), so every rank fails at once naming it (Communicator::refuse_join).")
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
            auto run = [&](bool host) {
              std::shared_lock lock(pc.mu);
              Communicator& c = pc.get();
              // A call on host memory waits for the peers; one on a GPU is only enqueued.
              std::optional<Interruptible> ctrl_c;
              if (host) ctrl_c.emplace([&c] { c.abort(kInterruptReason); });
              if (coll == static_cast<int>(Collective::AllReduce))
                c.all_reduce(b.ptr, b.ptr, count, b.dtype, static_cast<RedOp>(op), reinterpret_cast<Stream>(stream));
              else
                c.broadcast(b.ptr, b.ptr, count, b.dtype, root, reinterpret_cast<Stream>(stream));
            };
            if (dev_type != kDevCPU) {
              nb::gil_scoped_release nogil;
              run(false);
            } else {
              interruptible([&] { run(true); });
            }
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
            interruptible([&] {
              std::shared_lock lock(p.mu);
              Communicator& c = p.get();
              Interruptible ctrl_c([&c] { c.abort(kInterruptReason); });
              out = c.allgather_bytes(in);
            });
            nb::list l;
            for (const auto& s : out) l.append(nb::bytes(s.data(), s.size()));
            return l;
          },
          nb::arg("blob"), "Every rank's blob (bytes), indexed by rank, over the bootstrap network.")
      .def("host_barrier", [](PyComm& p) { host_step(p, &Communicator::host_barrier); })
      // Collective, bounded by the join timeout; interruptible like the other blocking host steps.
      .def("suspend", [](PyComm& p) { host_step(p, &Communicator::suspend); })
      .def("resume", [](PyComm& p) { host_step(p, &Communicator::resume); })
      .def_prop_ro("suspended", [](PyComm& p) { return p.c ? p.c->suspended() : false; })
      .def("mem_stats",
           [](PyComm& p) {
             std::shared_lock lock(p.mu);
             const MemoryStats m = p.get().mem_stats();
             nb::dict d;
             d["suspendable_bytes"] = m.suspendable_bytes;
             d["persistent_bytes"] = m.persistent_bytes;
             d["total_bytes"] = m.total_bytes();
             d["suspended"] = m.suspended;
             return d;
           })
      .def("check",
           [](PyComm& p) {
             std::shared_lock lock(p.mu);
             p.get().check();
           })
      .def(
          "synchronize",
          [](PyComm& p, uintptr_t stream) {
            interruptible([&] {  // waits for the device
              std::shared_lock lock(p.mu);
              Communicator& c = p.get();
              Interruptible ctrl_c([&c] { c.abort(kInterruptReason); });
              c.synchronize(reinterpret_cast<Stream>(stream));
            });
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
      // A bad argument the Python layer found (or the extension, on a group of one): refused
      // through Communicator::refuse_call, which tells the other ranks; raises InvalidArgumentError.
      .def(
          "refuse",
          [](PyComm& p, const std::string& message) {
            nb::gil_scoped_release nogil;
            std::shared_lock lock(p.mu);
            p.get().refuse_call(InvalidArgument(message, p.rank));
          },
          nb::arg("message"))
      // Elastic membership (docs/elastic.md): each returns a new _Communicator.
      .def(
          "shrink",
          [](PyComm& p, const std::vector<int>& exclude, nb::handle join_timeout) {
            const auto jt = join_timeout.is_none() ? std::chrono::milliseconds(0)
                                                   : timeout_from_seconds(nb::cast<double>(join_timeout), "join_timeout");
            std::unique_ptr<Communicator> c;
            {
              nb::gil_scoped_release nogil;  // joins the survivors' group
              std::shared_lock lock(p.mu);
              c = p.get().shrink(exclude, jt);
            }
            return new PyComm(std::move(c));
          },
          nb::arg("exclude"), nb::arg("join_timeout").none() = nb::none(), nb::rv_policy::take_ownership)
      .def("grow_id", [](PyComm& p) { return p.get().grow_id(); })
      .def(
          "grow",
          [](PyComm& p, int world_size, std::optional<UniqueId> uid, int rank, nb::handle join_timeout) {
            const auto jt = join_timeout.is_none() ? std::chrono::milliseconds(0)
                                                   : timeout_from_seconds(nb::cast<double>(join_timeout), "join_timeout");
            std::unique_ptr<Communicator> c;
            {
              nb::gil_scoped_release nogil;
              std::shared_lock lock(p.mu);
              c = p.get().grow(world_size, uid, rank, jt);
            }
            return new PyComm(std::move(c));
          },
          nb::arg("world_size"), nb::arg("uid").none() = nb::none(), nb::arg("rank") = -1,
          nb::arg("join_timeout").none() = nb::none(), nb::rv_policy::take_ownership)
      .def("close", [](PyComm& p) {
        // A fork() child: nothing to wait for (the parent's calls are not here), and the
        // Communicator's teardown in a child touches nothing the parent shares.
        if (::getpid() != p.creator) return p.c.reset();
        nb::gil_scoped_release nogil;  // waits for running calls, then says goodbye to the root
        std::unique_lock lock(p.mu);
        p.c.reset();
      });
}

}  // namespace actorcc::py
