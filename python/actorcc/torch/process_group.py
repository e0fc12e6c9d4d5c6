"""ActorccProcessGroup: the Python torch.distributed ProcessGroup of the "actorcc" backend, its
communicators (one per device type), its refusals, its collectives and suspend/resume; the
CPU side of a "cpu:gloo,cuda:actorcc" group routed to gloo (see the package's docstring)."""
from __future__ import annotations

import datetime
import functools
import math
import threading
import time

import torch
import torch.distributed as dist

from .. import _tensors as T
from .._actorcc import InvalidArgumentError, UniqueId, UnsupportedError
from ..communicator import Communicator
from . import dtypes as D
from ._args import _blocking, _first_tensor, _flat
from .p2p import P2PCalls
from .work import DeviceWork, DoneWork, HostQueue, HostWork, current_stream, record_event

__all__ = ["BACKEND_NAME", "ActorccProcessGroup"]

BACKEND_NAME = "actorcc"
_STORE_KEY = "actorcc_uid"
_OPS = {"SUM": "sum", "PRODUCT": "prod", "MIN": "min", "MAX": "max", "AVG": "avg"}


# The per-call maps of the fast paths, keyed by torch's own objects (no string work per call).
_DTYPE_CODES = {getattr(torch, name): code for name, code in T.DTYPE_CODES.items() if hasattr(torch, name)}
_RED_CODES = {getattr(dist.ReduceOp, name): T.OP_CODES[ours] for name, ours in _OPS.items()
              if hasattr(dist.ReduceOp, name)}  # RedOpType -> actorcc::RedOp code
_SUM = T.OP_CODES["sum"]
# ReduceOp.op (its RedOpType) is what the map is keyed by; a torch without it takes the general path.
_FAST = hasattr(dist.AllreduceOptions().reduceOp, "op")
_ALL_REDUCE = T.ALL_REDUCE


def _op_name(op):
    """actorcc's name of torch reduce op `op`; None where actorcc has none."""
    for name, ours in _OPS.items():
        ref = getattr(dist.ReduceOp, name, None)
        if ref is not None and op == ref:
            return ours
    return None


def _device_routed(method=None, *, name=None):
    """A collective whose CPU tensors go to the group's CPU backend where the backend string
    names one (cpu:gloo,...): the same call, by the same name (or by `name`, for a method
    defined under another: @_device_routed(name="allreduce")), on that backend."""
    if method is None:
        return functools.partial(_device_routed, name=name)
    name = name or method.__name__

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        if self._deferred:
            self._flush_p2p()  # deferred sends and receives go first, in call order
        if self._routes_cpu():
            t = _first_tensor(args)
            other = self._cpu_backend() if t is not None and not t.is_cuda else None
            if other is not None:
                return getattr(other, name)(*args, **kwargs)
        return method(self, *args, **kwargs)
    return call


def _cpu_backend_name(pg):
    """The backend the group's backend string gives CPU tensors ("gloo" in
    "cpu:gloo,cuda:actorcc"), or None where it is actorcc or the string names no devices."""
    from torch.distributed import distributed_c10d as c10d
    config = str(getattr(c10d._world, "pg_backend_config", {}).get(pg, ""))
    for part in config.split(","):
        device, _, backend = part.partition(":")
        if device.strip() == "cpu" and backend and backend.strip() != BACKEND_NAME:
            return backend.strip()
    return None


class ActorccProcessGroup(P2PCalls, dist.ProcessGroup):
    """A torch.distributed process group whose calls run on actorcc communicators."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._store = store
        self._rank_ = rank
        self._size_ = size
        self._timeout = _timeout_of(timeout)
        self._comms = {}
        self._lock = threading.Lock()
        self._batch = None  # the send/recv ops of a batch_isend_irecv being collected
        self._deferred = []  # (kind, tensor, peer, work): sends and receives not yet issued
        self._cpu_other = None  # (the CPU backend of a cpu:<other>,cuda:actorcc group,) once known
        self._cpu_route = None  # whether the group's backend string sends CPU tensors elsewhere
        self._queue = None  # the HostQueue of the group's CPU calls, made by the first one

    # ---- identity ---------------------------------------------------------------------------
    def getBackendName(self):
        return BACKEND_NAME

    # torch keeps a group's name in its per-device backends, which a Python group has none of
    # ("ProcessGroup name not set" from DeviceMesh, so FSDP2): this group keeps its own.
    def _set_group_name(self, name):
        self._group_name = name

    @property
    def group_name(self):
        return getattr(self, "_group_name", "")

    def name(self):
        return BACKEND_NAME

    # ---- the communicators ------------------------------------------------------------------
    def _comm(self, tensors):
        t = tensors[0] if isinstance(tensors, (list, tuple)) else tensors
        kind = "cuda" if t.is_cuda else "cpu"
        comm = self._comms.get(kind)
        if comm is not None:
            return comm
        return self._make_comm(kind, t.device.index if kind == "cuda" else "cpu")

    def _make_comm(self, kind, device):
        """The group's communicator for `kind` ("cpu" or "cuda", on CUDA device index `device`),
        formed now by every rank of the group (at their first call with such tensors, or at the
        group's creation where its device is known then: _eager_device)."""
        with self._lock:
            if kind not in self._comms:
                # The group's timeout bounds the whole formation, as NCCL's does its lazy init: the
                # wait for rank 0's id and the join together (a store of its own may have another
                # timeout, 5 minutes by default for a TCPStore).
                deadline = time.monotonic() + self._timeout if self._timeout else math.inf
                key = f"{_STORE_KEY}/{kind}"
                if self._rank_ == 0:  # this process hosts the root: its loss is rank 0's death
                    uid = UniqueId.create("", creator_is_rank0=True)
                    self._store.set(key, str(uid))
                else:
                    uid = self._uid_of_rank0(key, kind, deadline)
                left = max(deadline - time.monotonic(), 0.001)
                self._comms[kind] = Communicator(uid, self._rank_, self._size_, device=device,
                                                 timeout=self._timeout or None,
                                                 join_timeout=None if math.isinf(left) else left)
            return self._comms[kind]

    def _uid_of_rank0(self, key, kind, deadline):
        """The UniqueId rank 0 publishes in the store on its first call with `kind` tensors,
        waited for until `deadline` (a TimeoutError naming rank 0 after it)."""
        left = deadline - time.monotonic()
        if not math.isinf(left):
            try:
                self._store.wait([key], datetime.timedelta(seconds=max(left, 0.001)))
            except Exception as cause:  # noqa: BLE001 - torch's store raises its own types on a timeout
                from .._actorcc import TimeoutError as _Timeout
                e = _Timeout(f"actorcc torch backend: rank {self._rank_}: rank 0 did not create the group's {kind} "
                             f"communicator within the group's timeout of {self._timeout:g} s (rank 0 creates it in "
                             f"init_process_group or new_group where the group's device is known there, else on its "
                             f"first call with {kind} tensors; its store said: {cause})")
                e.rank = e.observer_rank = self._rank_
                e.culprit = 0
                raise e from None
        return self._store.get(key).decode()

    def _routes_cpu(self):
        """Whether CPU tensors may go to another backend (cpu:gloo,cuda:actorcc); asked once."""
        route = self._cpu_route
        if route is None:
            route = self._cpu_route = _cpu_backend_name(self) is not None
        return route

    def _cpu_backend(self):
        """The backend of a cpu:gloo,cuda:actorcc group's CPU tensors, made on its first CPU call
        (by every rank, in the group's call order, like the communicators); None: actorcc."""
        if self._cpu_other is None:
            name = _cpu_backend_name(self)
            if name is None:
                self._cpu_other = (None,)
            elif name == "gloo":
                store = dist.PrefixStore("actorcc_cpu_gloo/", self._store)
                timeout = datetime.timedelta(seconds=self._timeout or 1800)
                self._cpu_other = (dist.ProcessGroupGloo(store, self._rank_, self._size_, timeout),)
            else:
                raise UnsupportedError(f"actorcc torch backend: CPU tensors on backend '{name}' (only gloo or "
                                       f"actorcc can serve the CPU side of a group whose CUDA side is actorcc)")
        return self._cpu_other[0]

    # ---- refusals -----------------------------------------------------------------------------
    def _refuse(self, ref, error):
        """Raises `error`, a call this layer cannot run, after telling the other ranks through
        the communicator of `ref`'s device type (made now if this is the group's first call on
        it: the others are making theirs), as the communicator does for the bad arguments it
        finds itself: the group is aborted, so the others' pending and later calls raise a
        RemoteError naming this rank and the reason at once instead of waiting for their
        timeout (docs/reliability.md)."""
        if self._size_ > 1:  # a group of one has nobody to tell
            comm = self._comm(ref) if ref is not None else next(iter(self._comms.values()), None)
            if comm is not None:
                comm._refuse(error)
        raise error

    def _op(self, opts, ref):
        """actorcc's name of the reduce op in `opts` (sum where opts has none)."""
        if opts is None or not hasattr(opts, "reduceOp"):
            return "sum"
        ours = _op_name(opts.reduceOp)
        if ours is None:
            op = opts.reduceOp
            name = str(getattr(op, "op", op)).rpartition(".")[2]  # a ReduceOp object prints as its address
            self._refuse(ref, UnsupportedError(f"actorcc torch backend: reduce op {name} is not supported "
                                               f"(SUM, PRODUCT, MIN, MAX, AVG)"))
        return ours

    def _w(self, t):
        """t as the communicator takes it (t or a view of its memory: bool and float8 as uint8,
        complex as its real view; actorcc.torch.dtypes); a dtype NCCL's backend refuses too is
        refused through the group."""
        w, e = D.wire(t, self._rank_)
        if e is not None:
            self._refuse(t, e)
        return w

    def _red(self, opts, t, what):
        """actorcc's reduce op for the op in `opts` on t's dtype (bool: SUM is MAX, PRODUCT is
        MIN, as on NCCL's backend); an op the dtype does not take is refused through the group."""
        op, e = D.reduce_op(t.dtype, self._op(opts, t), what, self._rank_)
        if e is not None:
            self._refuse(t, e)
        return op

    def _check_one(self, tensors, what):
        if len(tensors) != 1:
            self._refuse(_first_tensor(tensors), UnsupportedError(
                f"actorcc torch backend: {what} takes one tensor per process, got {len(tensors)}"))
        return tensors[0]

    # ---- issuing ----------------------------------------------------------------------------
    def _issue(self, ref, call, result, opts=None):
        """Runs call(comm) on the communicator of `ref`'s device type and returns its Work:
        CPU calls go to the group's queue (their Work raises their error), or run now where torch
        waits on them at once and nothing is queued; CUDA calls are enqueued on the current stream
        now (see actorcc.torch.work)."""
        comm = self._comm(ref)
        if not ref.is_cuda:
            queue = self._host_queue()
            if _blocking(opts) and queue.idle():
                return queue.run_here(lambda: call(comm), result)
            work = HostWork(result, self._rank_)
            queue.submit(lambda: call(comm), [work])
            return work
        call(comm)
        return self._device_work(ref.get_device(), comm, result, opts)

    @staticmethod
    def _device_work(device, comm, result, opts):
        """The Work of a CUDA call just enqueued on the current stream of `device`: with an event
        after it unless torch waits on it at once (then on the same stream)."""
        stream = current_stream(device)[0]
        return DeviceWork(result, device, stream, comm._c.check, None if _blocking(opts) else record_event(stream))

    def _routed_elsewhere(self, t):
        """Whether tensor t goes to the group's other CPU backend (cpu:gloo,cuda:actorcc)."""
        self._flush_p2p()
        return not t.is_cuda and self._cpu_backend() is not None

    @staticmethod
    def _each(single, outputs, inputs, opts):
        for o, i in zip(outputs, inputs):
            single(o, i, opts).wait()
        return DoneWork(outputs)

    def _host_queue(self):
        q = self._queue
        if q is not None:
            return q
        with self._lock:
            if self._queue is None:
                self._queue = HostQueue(self._rank_)
            return self._queue

    # ---- collectives ------------------------------------------------------------------------
    # allreduce is two methods: the hot path below, and this general one it falls back to, which
    # routes CPU tensors by torch's name for the call and makes every refusal.
    @_device_routed(name="allreduce")
    def _allreduce(self, tensors, opts=None):
        ops = [self._red(opts, t, "all_reduce") for t in tensors]
        wires = [self._w(t) for t in tensors]

        def call(comm):
            for t, w, op in zip(tensors, wires, ops):
                r = D.reducible(w, t.dtype)
                comm.all_reduce(r, op=op)
                D.settle(w, r, t.dtype)
        return self._issue(tensors[0], call, tensors, opts)

    def allreduce(self, tensors, opts=None):
        """The hot path (one contiguous tensor of a supported dtype and op, the group's
        communicator made, nothing deferred): straight into the extension with raw arguments (no
        DLPack, no descriptor tuple, no routing), a CUDA call onto the current stream, a CPU call
        in this thread where torch waits on it at once and nothing is queued. Anything else takes
        the general path, which also makes every refusal."""
        t = tensors[0]
        if len(tensors) == 1 and not self._deferred and _FAST:
            red = _RED_CODES.get(opts.reduceOp.op) if opts is not None else _SUM
            code = _DTYPE_CODES.get(t.dtype)
            if red is not None and code is not None and t.is_contiguous():
                if t.is_cuda:
                    comm = self._comms.get("cuda")
                    if comm is not None:
                        dev = t.get_device()
                        stream, raw = current_stream(dev)
                        try:
                            comm._inplace(_ALL_REDUCE, t.data_ptr(), t.numel(), code, T.DEV_CUDA, dev, red, 0, raw)
                        except InvalidArgumentError as e:
                            comm._refuse(e)  # as the communicator's own calls refuse
                            raise
                        return DeviceWork(tensors, dev, stream, comm._c.check,
                                          None if _blocking(opts) else record_event(stream))
                elif self._cpu_route is False and _blocking(opts):
                    comm = self._comms.get("cpu")
                    queue = self._queue
                    if comm is not None and (queue is None or queue.idle()):
                        try:
                            comm._inplace(_ALL_REDUCE, t.data_ptr(), t.numel(), code, T.DEV_CPU, 0, red, 0, 0)
                        except InvalidArgumentError as e:
                            comm._refuse(e)
                            return HostWork(tensors, self._rank_, e)
                        except Exception as e:  # noqa: BLE001 - raised by the Work, as a queued call's
                            return HostWork(tensors, self._rank_, e)
                        return HostWork(tensors, self._rank_, None)
        return self._allreduce(tensors, opts)

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    @_device_routed
    def broadcast(self, tensors, opts):
        wires = [self._w(t) for t in tensors]

        def call(comm):
            for w in wires:
                comm.broadcast(w, root=opts.rootRank)
        return self._issue(tensors[0], call, tensors, opts)

    @_device_routed
    def reduce(self, tensors, opts):
        t = self._check_one(tensors, "reduce")
        root, op, w = opts.rootRank, self._red(opts, t, "reduce"), self._w(t)

        def call(comm):
            r = D.reducible(w, t.dtype)
            comm.reduce(r, root=root, op=op)
            D.settle(w, r, t.dtype)
        return self._issue(t, call, tensors, opts)

    @_device_routed
    def allgather(self, output_lists, tensors, opts=None):
        t = self._check_one(tensors, "allgather")
        w, outs = self._w(t), [self._w(o) for o in output_lists[0]]

        def call(comm):
            flat = comm.all_gather(_flat(w))
            n = w.numel()
            for r, o in enumerate(outs):
                o.copy_(flat[r * n:(r + 1) * n].view_as(o))
        return self._issue(t, call, output_lists)

    @_device_routed
    def _allgather_base(self, output, tensor, opts=None):
        w, out = self._w(tensor), self._w(output)
        return self._issue(tensor, lambda comm: comm.all_gather(_flat(w), out=_flat(out)), [output], opts)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        if self._routed_elsewhere(inputs[0]):  # gloo has no coalesced form in every torch version
            return self._each(self._allgather_base, outputs, inputs, opts)
        pairs = [(self._w(o), self._w(i)) for o, i in zip(outputs, inputs)]

        def call(comm):
            for o, i in pairs:
                comm.all_gather(_flat(i), out=_flat(o))
        return self._issue(inputs[0], call, outputs)

    @_device_routed
    def reduce_scatter(self, outputs, input_lists, opts=None):
        out = self._check_one(outputs, "reduce_scatter")
        op, w, ins = self._red(opts, out, "reduce_scatter"), self._w(out), [self._w(x) for x in input_lists[0]]

        def call(comm):
            self._reduce_scatter_one(comm, torch.cat([_flat(x) for x in ins]), _flat(w), op, out.dtype)
        return self._issue(out, call, outputs)

    @_device_routed
    def _reduce_scatter_base(self, output, tensor, opts=None):
        op, w, out = self._red(opts, tensor, "reduce_scatter"), self._w(tensor), self._w(output)
        return self._issue(tensor, lambda comm: self._reduce_scatter_one(comm, _flat(w), _flat(out), op, tensor.dtype),
                           [output], opts)

    @staticmethod
    def _reduce_scatter_one(comm, w, out, op, dtype):
        """One reduce_scatter of wire views `w` into `out` (a float8 one through float32 copies)."""
        r = D.reducible(out, dtype)
        comm.reduce_scatter(D.reducible(w, dtype), out=r, op=op)
        D.settle(out, r, dtype)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        if self._routed_elsewhere(inputs[0]):
            return self._each(self._reduce_scatter_base, outputs, inputs, opts)
        calls = [(self._w(o), self._w(i), self._red(opts, i, "reduce_scatter"), i.dtype)
                 for o, i in zip(outputs, inputs)]

        def call(comm):
            for o, i, op, dtype in calls:
                self._reduce_scatter_one(comm, _flat(i), _flat(o), op, dtype)
        return self._issue(inputs[0], call, outputs)

    def barrier(self, opts=None):
        self._flush_p2p()
        kind = next(iter(self._comms), None)
        if kind is None and self._cpu_backend() is not None:
            return self._cpu_backend().barrier()
        if kind is None:  # no call yet: a barrier on the device type a first call would use
            kind = "cuda" if torch.cuda.is_available() else "cpu"
        ref = torch.empty(0, device=kind)
        if kind == "cpu":
            return self._issue(ref, lambda comm: comm.barrier(), [], opts)
        # dist.barrier() on CUDA returns once the device has passed it, as the NCCL backend's.
        work = self._issue(ref, lambda comm: comm.barrier(stream=torch.cuda.current_stream()), [])
        work._event.synchronize()
        return work

    supports_splitting = False  # new_group makes its own group (torch 2.5 asks the backend)

    @_device_routed
    def alltoall_base(self, output, tensor, output_split_sizes, input_split_sizes, opts=None):
        result = [output]
        tensor, output = self._w(tensor), self._w(output)  # splits count rows of these views
        w = self._size_
        if not output_split_sizes and not input_split_sizes:
            return self._issue(tensor, lambda comm: comm.all_to_all(_flat(tensor), _flat(output)), result)
        # Splits count rows (dim 0); actorcc counts elements.
        row_in = tensor[0].numel() if tensor.dim() > 0 and tensor.shape[0] else 1
        row_out = output[0].numel() if output.dim() > 0 and output.shape[0] else 1
        ins = [s * row_in for s in (list(input_split_sizes) or [tensor.shape[0] // w] * w)]
        outs = [s * row_out for s in (list(output_split_sizes) or [output.shape[0] // w] * w)]
        return self._issue(tensor, lambda comm: comm.all_to_all_v(_flat(tensor), _flat(output), ins, outs), result)

    @_device_routed
    def alltoall(self, outputs, inputs, opts=None):
        result = outputs
        outputs, inputs = [self._w(t) for t in outputs], [self._w(t) for t in inputs]
        counts_in = [t.numel() for t in inputs]
        counts_out = [t.numel() for t in outputs]

        def call(comm):
            flat_out = torch.empty(sum(counts_out), dtype=outputs[0].dtype, device=outputs[0].device)
            comm.all_to_all_v(torch.cat([_flat(t) for t in inputs]), flat_out, counts_in, counts_out)
            at = 0
            for o, n in zip(outputs, counts_out):
                o.copy_(flat_out[at:at + n].view_as(o))
                at += n
        return self._issue(inputs[0], call, result)

    @_device_routed
    def gather(self, output_lists, tensors, opts):
        t = self._w(self._check_one(tensors, "gather"))
        root = opts.rootRank
        outs = [self._w(o) for o in output_lists[0]] if self._rank_ == root else []

        def call(comm):
            flat = comm.gather(_flat(t), root=root)
            if self._rank_ == root:
                n = t.numel()
                for r, o in enumerate(outs):
                    o.copy_(flat[r * n:(r + 1) * n].view_as(o))
        return self._issue(t, call, output_lists)

    @_device_routed
    def scatter(self, outputs, input_lists, opts):
        out = self._w(self._check_one(outputs, "scatter"))
        root = opts.rootRank
        ins = [self._w(x) for x in input_lists[0]] if self._rank_ == root else []

        def call(comm):
            full = torch.cat([_flat(x) for x in ins]) if self._rank_ == root else None
            comm.scatter(full, _flat(out), root=root)
        return self._issue(out, call, outputs)

    @_device_routed
    def gather_single(self, output, tensor, opts):
        root = opts.rootRank
        out = _flat(self._w(output)) if self._rank_ == root else None
        w = self._w(tensor)
        return self._issue(tensor, lambda comm: comm.gather(_flat(w), out=out, root=root), [output])

    # Newer torch calls the single-tensor collectives by these names (older: the ones above).
    all_gather_single = _allgather_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single = _reduce_scatter_base
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced
    all_to_all_single = alltoall_base

    # ---- suspend and resume ------------------------------------------------------------------
    # torch's own hooks are ProcessGroupNCCL's (pg.suspend(), pg.resume(), pg.memory_stats(), for
    # colocated RL between phases); torch.distributed.ProcessGroup has none, so this group offers
    # the same three methods itself, over Communicator.suspend / resume / mem_stats of each of
    # its communicators (in the same order on every rank), after the calls queued before them.
    def _after_queued(self, fn):
        self._flush_p2p()
        queue = self._queue
        if queue is None or queue.idle():
            return fn()
        work = HostWork(None, self._rank_)
        queue.submit(fn, [work])
        return work.wait()

    def suspend(self):
        """Releases every communicator's memory (collective; ProcessGroupNCCL.suspend). Calls
        while suspended raise an UnsupportedError saying so; resume() restores the group."""
        self._after_queued(lambda: [self._comms[k].suspend() for k in sorted(self._comms)])

    def resume(self):
        self._after_queued(lambda: [self._comms[k].resume() for k in sorted(self._comms)])

    def memory_stats(self):
        """ProcessGroupNCCL.memory_stats's shape (a dict of ints): the bytes suspend() releases
        (0 while suspended), the bytes kept, their total, and 1 while suspended, summed over the
        group's communicators."""
        out = {"suspendable_bytes": 0, "persistent_bytes": 0, "total_bytes": 0, "suspended": 0}
        for k in sorted(self._comms):
            m = self._comms[k].mem_stats()
            for key in ("suspendable_bytes", "persistent_bytes", "total_bytes"):
                out[key] += int(m[key])
            out["suspended"] |= int(m["suspended"])
        return out

    def shutdown(self):
        if self._queue is not None:  # the queued calls finish (or fail) first
            self._queue.shutdown()
            self._queue = None
        for c in self._comms.values():
            c.close()
        self._comms.clear()
        other = self._cpu_other[0] if self._cpu_other else None
        if other is not None and hasattr(other, "shutdown"):
            other.shutdown()

    def abort(self):
        for c in self._comms.values():
            c.abort("torch.distributed abort")


def _timeout_of(timeout):
    """The group's timeout in seconds. torch gives a backend it does not know its generic
    default, 30 minutes, where NCCL's backend gets 10 (torch.distributed.constants): a group that
    left it unset gets NCCL's, so a stalled or missing rank is reported when it would be with
    "nccl" (docs/reliability.md, defaults)."""
    if timeout is None:
        timeout = _default_pg_timeout()
    if isinstance(timeout, datetime.timedelta):
        if timeout == _default_pg_timeout():
            timeout = getattr(dist.constants, "default_pg_nccl_timeout", None) or datetime.timedelta(minutes=10)
        return timeout.total_seconds()
    return float(timeout)


def _default_pg_timeout():
    return getattr(dist.constants, "default_pg_timeout", datetime.timedelta(minutes=30))
