"""torch.distributed backend "actorcc".

    import actorcc.torch                      # registers the backend (idempotent)
    torch.distributed.init_process_group("actorcc", ...)   # instead of "nccl" / "gloo"

Any init_method torch supports (env://, tcp://, a TCPStore passed as store=); also
"cpu:gloo,cuda:actorcc". Subgroups (new_group) work the same way. The process group is a Python
ProcessGroup (as torch's test_c10d_pypg builds one): every call goes straight to an
actorcc.Communicator, so the C++ c10d machinery adds nothing to an actorcc call but the
Python dispatch.

How it maps onto actorcc:
- One actorcc communicator per device type the group is used with (CPU tensors: the CPU
  backend; CUDA tensors: the CUDA backend on the current device), made on the first call with
  such tensors: rank 0 creates its UniqueId and hands it over through the group's store, so
  nothing else is needed to form it (the ranks of a group make their calls in the same order).
- Stream semantics: a CUDA call is enqueued on the caller's current stream (where NCCL's
  backend uses its own stream and makes the current one wait); the result is ordered after
  the call on that stream either way. Work objects are complete when returned (CPU calls have
  run; CUDA calls are enqueued), and their futures hold the output tensors, which is what DDP's
  comm hooks read.
- "cpu:gloo,cuda:actorcc": torch replaces the whole group by a Python ProcessGroup that a
  backend creator returns (its other devices' backends are dropped), so this group routes CPU
  tensors itself: where the group's backend string maps "cpu" to another backend, the first
  call with CPU tensors creates that backend (gloo) over the group's store and every call with
  CPU tensors goes there; CUDA tensors stay on actorcc.
- batch_isend_irecv: the group says it coalesces, so torch hands it the whole batch, which
  runs as one actorcc batch_send_recv (any pattern completes); plain send/recv block.
- torch versions: run on 2.15 (everything above, DDP, FSDP2 on CPU) and 2.5.1 (the collective
  matrix, the gloo split, batches; DDP's constructor never returns there with this group, and
  2.5's FSDP2 needs CUDA). register_backend(name, fn, devices=...) is the same in both, and a
  repeated registration is skipped.
- Supported: allreduce (and coalesced), allgather / all_gather_into_tensor (and coalesced),
  reduce_scatter / reduce_scatter_tensor (and coalesced), broadcast, reduce, barrier, send,
  recv, alltoall / alltoall_base (all_to_all_single, with splits), gather, scatter. Reduce ops
  SUM, PRODUCT, MIN, MAX, AVG (PREMUL_SUM is refused). Send/recv tags must be 0.
"""
from __future__ import annotations

import datetime
import functools
import threading
import time

import torch
import torch.distributed as dist

from . import _tensors as T
from ._actorcc import InvalidArgumentError, UniqueId, UnsupportedError
from .communicator import Communicator

__all__ = ["BACKEND_NAME", "register", "ActorccProcessGroup"]

BACKEND_NAME = "actorcc"
_STORE_KEY = "actorcc_uid"
_OPS = {"SUM": "sum", "PRODUCT": "prod", "MIN": "min", "MAX": "max", "AVG": "avg"}


def _op_name(op):
    for name, ours in _OPS.items():
        ref = getattr(dist.ReduceOp, name, None)
        if ref is not None and op == ref:
            return ours
    raise UnsupportedError(f"actorcc torch backend: reduce op {op} is not supported (SUM, PRODUCT, MIN, MAX, AVG)")


def _flat(t):
    return t.reshape(-1)


def _first_tensor(x):
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (list, tuple)):
        for y in x:
            t = _first_tensor(y)
            if t is not None:
                return t
    return None


def _device_routed(method):
    """A collective whose CPU tensors go to the group's CPU backend where the backend string
    names one (cpu:gloo,...): the same call, by the same name, on that backend."""
    name = method.__name__

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        self._flush_p2p()  # deferred sends and receives go first, in call order
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


class _Work(dist._Work if hasattr(dist, "_Work") else dist.Work):
    """A completed call: wait() returns at once (CUDA work is ordered on the caller's stream),
    get_future() holds the output tensors."""

    def __init__(self, result):
        super().__init__()
        self._result = result
        self._future = torch.futures.Future()
        self._future.set_result(result)

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def result(self):
        return self._result

    def get_future(self):
        return self._future


class _DeferredP2P(_Work):
    """A send or recv not yet issued (see ActorccProcessGroup._flush_p2p): wait() issues it
    with every other deferred one; its future completes then."""

    def __init__(self, pg, result):
        super(_Work, self).__init__()  # torch's Work, not _Work's completed state
        self._pg, self._result, self._done = pg, result, False
        self._future = torch.futures.Future()

    def _complete(self):
        self._done = True
        self._future.set_result(self._result)

    def wait(self, timeout=None):
        if not self._done:
            self._pg._flush_p2p()
        return True

    def is_completed(self):
        return self._done


class ActorccProcessGroup(dist.ProcessGroup):
    """A torch.distributed process group whose calls run on actorcc communicators."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._store = store
        self._rank_ = rank
        self._size_ = size
        self._timeout = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
        self._comms = {}
        self._lock = threading.Lock()
        self._batch = None  # the send/recv ops of a batch_isend_irecv being collected
        self._deferred = []  # (kind, tensor, peer, work): sends and receives not yet issued
        self._cpu_other = None  # (the CPU backend of a cpu:<other>,cuda:actorcc group,) once known

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
        with self._lock:
            if kind not in self._comms:
                key = f"{_STORE_KEY}/{kind}"
                if self._rank_ == 0:
                    uid = UniqueId.create("")
                    self._store.set(key, str(uid))
                else:
                    uid = self._store.get(key).decode()
                device = t.device.index if kind == "cuda" else "cpu"
                self._comms[kind] = Communicator(uid, self._rank_, self._size_, device=device,
                                                 timeout=self._timeout or None, join_timeout=self._timeout or None)
            return self._comms[kind]

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

    def _check_one(self, tensors, what):
        if len(tensors) != 1:
            raise UnsupportedError(f"actorcc torch backend: {what} takes one tensor per process, got {len(tensors)}")
        return tensors[0]

    # ---- collectives ------------------------------------------------------------------------
    @_device_routed
    def allreduce(self, tensors, opts=None):
        op = _op_name(opts.reduceOp) if opts is not None and hasattr(opts, "reduceOp") else "sum"
        comm = self._comm(tensors)
        for t in tensors:
            comm.all_reduce(t, op=op)
        return _Work(tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        self.allreduce(tensors, opts).wait()
        return _Work(tensors)

    @_device_routed
    def broadcast(self, tensors, opts):
        comm = self._comm(tensors)
        for t in tensors:
            comm.broadcast(t, root=opts.rootRank)
        return _Work(tensors)

    @_device_routed
    def reduce(self, tensors, opts):
        t = self._check_one(tensors, "reduce")
        self._comm(t).reduce(t, root=opts.rootRank, op=_op_name(opts.reduceOp))
        return _Work(tensors)

    @_device_routed
    def allgather(self, output_lists, tensors, opts=None):
        t = self._check_one(tensors, "allgather")
        outs = output_lists[0]
        flat = self._comm(t).all_gather(_flat(t))
        n = t.numel()
        for r, o in enumerate(outs):
            o.copy_(flat[r * n:(r + 1) * n].view_as(o))
        return _Work(output_lists)

    @_device_routed
    def _allgather_base(self, output, tensor, opts=None):
        self._comm(tensor).all_gather(_flat(tensor), out=_flat(output))
        return _Work([output])

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        for o, i in zip(outputs, inputs):
            self._allgather_base(o, i, opts).wait()  # a CPU backend's work is asynchronous
        return _Work(outputs)

    @_device_routed
    def reduce_scatter(self, outputs, input_lists, opts=None):
        out = self._check_one(outputs, "reduce_scatter")
        full = torch.cat([_flat(x) for x in input_lists[0]])
        op = _op_name(opts.reduceOp) if opts is not None else "sum"
        self._comm(out).reduce_scatter(full, out=_flat(out), op=op)
        return _Work(outputs)

    @_device_routed
    def _reduce_scatter_base(self, output, tensor, opts=None):
        op = _op_name(opts.reduceOp) if opts is not None else "sum"
        self._comm(tensor).reduce_scatter(_flat(tensor), out=_flat(output), op=op)
        return _Work([output])

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        for o, i in zip(outputs, inputs):
            self._reduce_scatter_base(o, i, opts).wait()
        return _Work(outputs)

    def barrier(self, opts=None):
        self._flush_p2p()
        comm = next(iter(self._comms.values()), None)
        if comm is None and self._cpu_backend() is not None:
            return self._cpu_backend().barrier()
        if comm is None:  # no call yet: a barrier on the device type a first call would use
            comm = self._comm(torch.empty(0, device="cuda" if torch.cuda.is_available() else "cpu"))
        comm.barrier()
        return _Work([])

    # batch_isend_irecv: torch coalesces the ops of a batch for backends that say they can
    # (asking _get_backend(device)); between _start_coalescing and _end_coalescing send and
    # recv only collect, and the batch runs as one actorcc batch_send_recv, so any pattern of
    # them completes. Outside such a batch (torch before 2.6 issues a CPU batch op by op, as
    # isend/irecv) a send or recv is deferred: its Work's wait() or the next collective issues
    # every deferred one as one batch, so isend/irecv rings complete, and a blocking send/recv
    # (torch waits on it at once) runs alone.
    supports_coalescing = True
    supports_splitting = False  # new_group makes its own group (torch 2.5 asks the backend)

    def _get_backend(self, device):
        return self  # this one object serves every device of the group

    def _start_coalescing(self, device):
        self._batch = []

    def _end_coalescing(self, device):
        self._flush_p2p()
        batch, self._batch = self._batch, None
        other = self._cpu_backend() if batch and not batch[0][1].is_cuda else None
        if other is not None:  # the CPU backend's sends and receives are asynchronous: all at once
            works = [(other.send if k == "send" else other.recv)([t], peer, 0) for k, t, peer in batch]
            for w in works:
                w.wait()
        elif batch:
            self._comm(batch[0][1]).batch_send_recv(batch)
        return _Work([t for _, t, _ in batch or []])

    def _p2p(self, kind, tensors, peer, tag):
        t = self._check_one(tensors, kind)
        self._no_tag(tag)
        if self._batch is not None:
            self._batch.append((kind, _flat(t), peer))
        elif not t.is_cuda and self._cpu_backend() is not None:
            return getattr(self._cpu_backend(), kind)(tensors, peer, tag)
        else:
            work = _DeferredP2P(self, tensors)
            self._deferred.append((kind, _flat(t), peer, work))
            return work
        return _Work(tensors)

    def _flush_p2p(self):
        """Issues the deferred sends and receives, in order, as one batch per device type."""
        pending, self._deferred = self._deferred, []
        while pending:
            cuda = pending[0][1].is_cuda
            run = [p for p in pending if p[1].is_cuda == cuda]
            pending = [p for p in pending if p[1].is_cuda != cuda]
            self._comm(run[0][1]).batch_send_recv([(k, t, peer) for k, t, peer, _ in run])
            for *_, work in run:
                work._complete()

    def send(self, tensors, dst, tag=0):
        return self._p2p("send", tensors, dst, tag)

    def recv(self, tensors, src, tag=0):
        return self._p2p("recv", tensors, src, tag)

    def recv_anysource(self, tensors, tag=0):
        raise UnsupportedError("actorcc torch backend: recv from any source is not supported; name the source rank")

    @_device_routed
    def alltoall_base(self, output, tensor, output_split_sizes, input_split_sizes, opts=None):
        comm = self._comm(tensor)
        w = self._size_
        if not output_split_sizes and not input_split_sizes:
            comm.all_to_all(_flat(tensor), _flat(output))
            return _Work([output])
        # Splits count rows (dim 0); actorcc counts elements.
        row_in = tensor[0].numel() if tensor.dim() > 0 and tensor.shape[0] else 1
        row_out = output[0].numel() if output.dim() > 0 and output.shape[0] else 1
        ins = list(input_split_sizes) or [tensor.shape[0] // w] * w
        outs = list(output_split_sizes) or [output.shape[0] // w] * w
        comm.all_to_all_v(_flat(tensor), _flat(output), [s * row_in for s in ins], [s * row_out for s in outs])
        return _Work([output])

    @_device_routed
    def alltoall(self, outputs, inputs, opts=None):
        comm = self._comm(inputs)
        counts_in = [t.numel() for t in inputs]
        counts_out = [t.numel() for t in outputs]
        flat_out = torch.empty(sum(counts_out), dtype=outputs[0].dtype, device=outputs[0].device)
        comm.all_to_all_v(torch.cat([_flat(t) for t in inputs]), flat_out, counts_in, counts_out)
        at = 0
        for o, n in zip(outputs, counts_out):
            o.copy_(flat_out[at:at + n].view_as(o))
            at += n
        return _Work(outputs)

    @_device_routed
    def gather(self, output_lists, tensors, opts):
        t = self._check_one(tensors, "gather")
        root = opts.rootRank
        comm = self._comm(t)
        flat = comm.gather(_flat(t), root=root)
        if self._rank_ == root:
            n = t.numel()
            for r, o in enumerate(output_lists[0]):
                o.copy_(flat[r * n:(r + 1) * n].view_as(o))
        return _Work(output_lists)

    @_device_routed
    def scatter(self, outputs, input_lists, opts):
        out = self._check_one(outputs, "scatter")
        root = opts.rootRank
        full = torch.cat([_flat(x) for x in input_lists[0]]) if self._rank_ == root else None
        self._comm(out).scatter(full, _flat(out), root=root)
        return _Work(outputs)

    @_device_routed
    def gather_single(self, output, tensor, opts):
        root = opts.rootRank
        self._comm(tensor).gather(_flat(tensor), out=_flat(output) if self._rank_ == root else None, root=root)
        return _Work([output])

    # Newer torch calls the single-tensor collectives by these names (older: the ones above).
    all_gather_single = _allgather_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single = _reduce_scatter_base
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced
    all_to_all_single = alltoall_base

    @staticmethod
    def _no_tag(tag):
        if tag:
            raise InvalidArgumentError(f"actorcc torch backend: send/recv tags are not supported (got tag {tag})")

    def shutdown(self):
        for c in self._comms.values():
            c.close()
        self._comms.clear()
        other = self._cpu_other[0] if self._cpu_other else None
        if other is not None and hasattr(other, "shutdown"):
            other.shutdown()

    def abort(self):
        for c in self._comms.values():
            c.abort("torch.distributed abort")


def _create(store, rank, size, timeout):
    # With "cpu:gloo,cuda:actorcc" torch has just built a gloo backend for the group, which it
    # drops once this returns; a rank that dropped it while another was still connecting broke
    # the other's gloo setup (torch 2.5: "connectFullMesh failed ... closed by peer"). So every
    # rank leaves only once all have got here, through the group's store.
    store.add("actorcc_created", 1)
    deadline = time.monotonic() + (timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else 1800)
    while int(store.add("actorcc_created", 0)) < size:
        if time.monotonic() > deadline:
            raise RuntimeError(f"actorcc torch backend: rank {rank}: the other ranks of the group did not arrive")
        time.sleep(0.005)
    return ActorccProcessGroup(store, rank, size, timeout)


def register():
    """Registers the backend with torch.distributed (devices cpu and cuda). Idempotent: a worker
    that imports actorcc.torch again (or two packages that both register it) is fine."""
    if BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}) or hasattr(dist.Backend, BACKEND_NAME.upper()):
        return BACKEND_NAME
    try:
        dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu", "cuda"])
    except TypeError:  # torch without the devices= keyword
        dist.Backend.register_backend(BACKEND_NAME, _create)
    return BACKEND_NAME


register()
