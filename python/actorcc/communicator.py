"""actorcc.Communicator: one rank of a stateless group.

A group is an object, not process-global state: a process may hold several, created in any
order, and nothing here touches torch.distributed. Collectives take any DLPack tensor (torch,
cupy, jax, numpy); torch tensors use a faster descriptor path.

Stream semantics (CUDA backend): a call is enqueued on `stream` (default: the current stream of
the tensor's framework, e.g. torch.cuda.current_stream()) and returns without waiting, as
NCCL does; async_op=True additionally returns a Work whose event was recorded on that stream.
CPU backend: a call returns when it is complete; async_op=True runs it on this communicator's
worker thread (calls run in the order they were issued) and returns a Work.
"""
from __future__ import annotations

import atexit
import datetime
import re
import sys
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

from . import _tensors as T
from ._actorcc import Error, RemoteError, UniqueId, UnsupportedError, _Communicator
from ._actorcc import TimeoutError as _TimeoutError
from ._refusal import refused_through_group
from .collectives import CollectiveCalls, P2POp  # noqa: F401
from .work import Work, record_event

__all__ = ["Communicator", "Work", "P2POp"]

# "actorcc invalid argument error: rank 2: " before an error's own text.
_ERROR_HEAD = re.compile(r"^actorcc [a-z ]+ error: (rank -?\d+: )?")
# What the extension puts before the text of a bad argument (dropped when it is told to the others).
_ERROR_PREFIX = "actorcc invalid argument error: "

# Errors the group reports about other ranks (see Communicator.__exit__).
_GROUP_ERRORS = (RemoteError, _TimeoutError)

_OPS = T.OP_CODES
_torch_dtypes = T._torch_dtypes
_cur_stream = None  # torch._C._cuda_getCurrentRawStream, once torch has been seen


def _torch_seen():
    global _cur_stream
    _cur_stream = T._torch_raw_stream


T.on_torch_found.append(_torch_seen)

# The communicators of this process that may still be open (for _abort_on_fatal_exception).
_OPEN = weakref.WeakSet()


def _abort_on_fatal_exception():
    """At the exit of a script that an uncaught exception ended (Ctrl-C while it ran Python
    code between calls, or a bug), the communicators still open abort naming it, as a `with`
    block left on an exception does: the other ranks read why this rank left instead of a plain
    "closed the communicator". Not for sys.exit() (no exception is recorded), not for an error the
    group itself raised (the others know it, naming the rank at fault), and not in an interactive
    session (a prompt, IPython, a Jupyter kernel), where sys.last_value is any earlier error a
    cell or a line raised."""
    exc = getattr(sys, "last_value", None)
    if exc is None or isinstance(exc, _GROUP_ERRORS) or hasattr(sys, "ps1") or sys.flags.interactive:
        return
    if "IPython" in sys.modules:
        return
    for c in list(_OPEN):
        if c.closed or c.aborted:
            continue
        why = f"rank {c.rank}'s program ended on an uncaught {type(exc).__name__}" + (f": {exc}" if str(exc) else "")
        try:
            c.abort(why)
        except Exception:  # noqa: BLE001 - the exit goes on; the others then see the close
            pass


def _release_at_exit():
    """At the interpreter's exit, the communicators still open drop their native handles, which
    then leave their groups as close() does (once no thread is inside a call with one). Python
    objects can outlive the program's own references: torch.distributed keeps a process group
    that destroy_process_group() never removed in its C++ registry, destroyed after the
    interpreter, so the extension's instances were still alive when nanobind tore its types
    down, and it printed 16 lines of "leaked instances ... reference counting issue" that sent
    users hunting for a bug that is not there. Registered before the exception hook, so it
    runs after it (atexit runs last in, first out): an abort there names the cause first."""
    for c in list(_OPEN):
        c._release()


atexit.register(_release_at_exit)
atexit.register(_abort_on_fatal_exception)


def _seconds(v, name):
    if v is None:
        return None
    if isinstance(v, datetime.timedelta):
        v = v.total_seconds()
    v = float(v)
    if not v > 0:
        raise T.invalid(f"{name} must be > 0 seconds, got {v}")
    return v


def _device_index(device):
    """None | int | 'cuda:N' | 'cuda' | 'cpu' | torch.device -> (ordinal or -1, backend it
    implies: None for None, 'cpu' for 'cpu', else 'cuda')."""
    if device is None:
        return -1, None
    if isinstance(device, int):
        return device, "cuda"
    typ = getattr(device, "type", None)
    if typ is not None:  # torch.device
        if typ == "cpu":
            return -1, "cpu"
        if typ != "cuda":
            raise T.invalid(f"device {device!r} is neither a CUDA device nor 'cpu'")
        return (device.index if device.index is not None else -1), "cuda"
    s = str(device)
    if s == "cpu":
        return -1, "cpu"
    if s == "cuda" or (s.startswith("cuda:") and s[5:].isdigit()):
        return (int(s[5:]) if ":" in s else -1), "cuda"
    raise T.invalid(f"device must be None, an int, 'cuda:N', 'cpu' or a torch.device, got {device!r}")


def _backend_of(device, backend):
    """(ordinal, backend) for the extension. A device that names a GPU asks for the CUDA
    backend: on a machine without one it must raise, as backend='cuda' does, not quietly
    run on the CPU backend."""
    dev, implied = _device_index(device)
    if implied is None or backend == implied:
        return dev, backend
    if backend == "auto":
        return dev, implied
    raise T.invalid(f"device={device!r} and backend={backend!r} contradict each other")


def _open(make, device, backend, refuse=None):
    """make(ordinal, backend) -> _Communicator; the error of a GPU device on a machine without
    one names the device the caller gave. refuse(error): tells the group that a mistake found
    here keeps this rank from joining (the C++ side does so for its own)."""
    try:
        dev, be = _backend_of(device, backend)
    except Error as e:
        if refuse is not None:
            refuse(e)
        raise
    try:
        return make(dev, be)
    except UnsupportedError as e:
        if backend != "auto" or be != "cuda":
            raise
        e.args = (f"{e} (device={device!r} selects the CUDA backend; for host arrays pass device='cpu' or "
                  "backend='cpu')",)
        raise


class Communicator(CollectiveCalls):
    """One rank of a group (point-to-point, all_to_all, reduce, gather, scatter: see
    actorcc.collectives).

    Communicator(uid, rank, world_size, device=None, timeout=None, join_timeout=None,
                 backend="auto", *, algo="", checked=False, workspace_bytes=0)

    uid: a UniqueId (or its str) made once by UniqueId.create() and handed to every rank.
    device: CUDA ordinal as this process sees it (int, 'cuda:N', torch.device): selects the
      CUDA backend (raises UnsupportedError where no GPU is usable); 'cpu' selects the CPU
      backend; None = the current device with backend's choice.
    timeout: seconds (or timedelta) bounding every wait inside a call (default 300, or
      ACTORCC_TIMEOUT_S); it does not bound the join, even when smaller. join_timeout: how long
      ranks may take to arrive (default 600, or ACTORCC_JOIN_TIMEOUT_S): it alone bounds the
      join. backend: 'auto' (CUDA when every rank has a GPU), 'cuda', 'cpu'.
    The constructor blocks (without the GIL) until every rank has joined. A mistake of this
    rank's own (a bad argument, a rank out of range, a device it cannot use) is told to the
    group's root before it is raised: every other rank's join fails at once naming this rank and
    the mistake, and the id is spent (the others need a new one too).
    """

    def __init__(self, uid, rank, world_size, device=None, timeout=None, join_timeout=None, backend="auto",
                 *, algo="", checked=False, workspace_bytes=0):
        if isinstance(uid, str):
            uid = UniqueId.parse(uid)
        rank, world_size = int(rank), int(world_size)

        def refuse(e):  # the others learn at once why this rank will not join
            _Communicator.refuse_join(uid, rank, world_size, _ERROR_HEAD.sub("", str(e), count=1))

        try:
            secs, join_secs = _seconds(timeout, "timeout"), _seconds(join_timeout, "join_timeout")
        except Error as e:
            refuse(e)
            raise
        c = _open(lambda dev, be: _Communicator(
            uid, rank, world_size, backend=be, device=dev, timeout=secs, join_timeout=join_secs, algo=algo,
            checked=checked, workspace_bytes=workspace_bytes), device, backend, refuse)
        self._setup(c)

    @classmethod
    def from_address(cls, host, port, rank, world_size, device=None, timeout=None, join_timeout=None,
                     backend="auto", *, algo="", checked=False, workspace_bytes=0):
        """vLLM-style group: rank 0 hosts the root on host:port, the others connect to it
        (retrying until join_timeout while rank 0 is not up yet). Ranks of one launch should
        share a run id (ACTORCC_RUN_ID, else the launcher's TORCHELASTIC_RUN_ID or SLURM_JOB_ID):
        a rank of another launch on the same address is then refused, and the group forms
        without waiting the 1 s in which, without one, a second launch would show itself."""
        c = _open(lambda dev, be: _Communicator.from_address(
            str(host), int(port), int(rank), int(world_size), backend=be, device=dev,
            timeout=_seconds(timeout, "timeout"), join_timeout=_seconds(join_timeout, "join_timeout"),
            algo=algo, checked=checked, workspace_bytes=workspace_bytes), device, backend)
        self = cls.__new__(cls)
        self._setup(c)
        return self

    def _setup(self, c):
        self._c = c
        self._call = c.call
        self._inplace = c.call_inplace
        self._rank = c.rank
        self._world = c.world_size
        self._cpu = c.backend == "cpu"
        self._device = c.device
        self._executor = None  # CPU backend: created by the first async_op=True call
        self._lock = threading.Lock()
        _OPEN.add(self)

    # ---- properties -------------------------------------------------------------------
    @property
    def rank(self):
        return self._rank

    @property
    def world_size(self):
        return self._world

    @property
    def backend(self):
        """'cpu' or 'cuda'."""
        return self._c.backend

    @property
    def device(self):
        """CUDA ordinal in this process; -1 on the CPU backend."""
        return self._device

    @property
    def num_nodes(self):
        return self._c.num_nodes

    @property
    def peers(self):
        """Every rank's identity (host, pid, GPU UUID, PCI bus id, node, local rank, ...)."""
        return self._c.peers

    @property
    def closed(self):
        return self._c is None or self._c.closed

    @property
    def aborted(self):
        return self._c is not None and self._c.aborted

    def _release(self):
        """Drops every reference this object holds to the native communicator (_release_at_exit);
        the native one is destroyed (leaving its group) when the last use of it ends."""
        self._c = self._call = self._inplace = None

    def plan(self, collective, nbytes, registered=False):
        """Name of the algorithm the planner would pick for `collective` of `nbytes` (the
        message for all_reduce and broadcast; the full buffer, world x count elements, for
        reduce_scatter and all_gather); `registered=True`: for a call whose output lies in a
        buffer passed to register_buffer (large all-reduces then take another route)."""
        return self._c.plan(collective, int(nbytes), bool(registered))

    def __repr__(self):
        return (f"<actorcc.Communicator rank {self._rank}/{self._world} backend={self._c.backend} "
                f"device={self._device}{' closed' if self.closed else ''}>")

    # ---- core -------------------------------------------------------------------------
    def _arg(self, x, what, writable):
        """The object handed to the extension for tensor x, and a dtype override."""
        if T.is_torch(x):
            return T.torch_desc(x, what, self._rank), -1
        if writable:
            T.check_mutable(x, what)
        v = T.numpy_bf16_view(x)
        if v is not None:
            return v, 2
        return x, -1

    def _run(self, coll, tensor, out, op, root, stream, async_op, result):
        rank = self._rank
        if coll == T.BARRIER:
            send = recv = None
            override = -1
            ref = None
        else:
            ref = tensor
            in_place = out is None or out is tensor
            send, override = self._arg(tensor, "tensor" if in_place else "input tensor", in_place)
            if in_place:
                recv = send
            else:
                recv, o2 = self._arg(out, "output tensor", True)
                if o2 != override:
                    raise T.invalid("dtype mismatch between input and output tensors", rank)
        if stream is not None:
            s = T.stream_handle(stream, self._rank)  # checked on the CPU backend too, where it is unused
        elif self._cpu or ref is None:
            s = 0
        else:
            s = T.current_stream(ref)
        ex = self._executor
        if not async_op:
            if ex is None:
                self._call(coll, send, recv, op, root, s, override, True)
            else:  # keep issue order with the pending async calls
                ex.submit(self._call(coll, send, recv, op, root, s, override, False).run).result()
            return result
        if self._cpu:
            call = self._call(coll, send, recv, op, root, s, override, False)  # validated here
            if ex is None:
                ex = self._get_executor()
            return Work(result, future=ex.submit(call.run))
        self._call(coll, send, recv, op, root, s, override, True)
        return Work(result, event=record_event(ref, s) if ref is not None else None, check=self._c.check)

    def _get_executor(self):
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"actorcc-r{self._rank}")
            return self._executor

    # ---- collectives ------------------------------------------------------------------
    @refused_through_group
    def all_reduce(self, tensor, op="sum", out=None, stream=None, async_op=False):
        """Reduces `tensor` over all ranks, in place (or into `out`, same size and dtype).
        Returns the result tensor, or a Work when async_op=True."""
        opc = _OPS.get(op) if op.__class__ is str else None
        if opc is None:
            opc = T.parse_op(op, self._rank)
        if (tensor.__class__ is T._torch_tensor and out is None and not async_op and self._executor is None):
            # The hot path (eager torch, in place): inlined, one call into the extension.
            code = _torch_dtypes.get(tensor.dtype)
            if code is not None and tensor.is_contiguous():
                if tensor.is_cuda:
                    dev = tensor.get_device()
                    s = (_cur_stream(dev) if _cur_stream is not None else T.current_stream(tensor)) \
                        if stream is None else T.stream_handle(stream, self._rank)
                    self._inplace(0, tensor.data_ptr(), tensor.numel(), code, 2, dev, opc, 0, s)
                    return tensor
        return self._run(T.ALL_REDUCE, tensor, out, opc, 0, stream, async_op, tensor if out is None else out)

    @refused_through_group
    def reduce_scatter(self, tensor, out=None, op="sum", stream=None, async_op=False):
        """Reduces `tensor` (world_size * n elements) over all ranks; rank r receives the r-th
        block of n. Without `out` a new tensor is returned (shape: dim 0 divided by world_size)."""
        opc = T.OP_CODES.get(op) if type(op) is str else None
        if opc is None:
            opc = T.parse_op(op, self._rank)
        if out is None:
            out = T.empty(tensor, self._scatter_shape(tensor))
        return self._run(T.REDUCE_SCATTER, tensor, out, opc, 0, stream, async_op, out)

    @refused_through_group
    def all_gather(self, tensor, out=None, stream=None, async_op=False):
        """Concatenates every rank's `tensor` (rank order, along dim 0) into `out` of
        world_size * n elements; without `out` a new tensor of the same framework is returned."""
        if out is None:
            shape = T.shape_of(tensor)
            if shape is None:
                raise T.invalid("all_gather: cannot tell the input's shape: pass out=", self._rank)
            shape = (self._world * shape[0],) + shape[1:] if shape else (self._world,)
            out = T.empty(tensor, shape)
        return self._run(T.ALL_GATHER, tensor, out, 0, 0, stream, async_op, out)

    @refused_through_group
    def broadcast(self, tensor, root=0, out=None, stream=None, async_op=False):
        """Copies root's `tensor` to every rank (in place, or into `out`)."""
        root = int(root)
        if not 0 <= root < self._world:
            raise T.invalid(f"broadcast: root {root} is outside the group of {self._world}", self._rank)
        return self._run(T.BROADCAST, tensor, out, 0, root, stream, async_op, tensor if out is None else out)

    @refused_through_group
    def barrier(self, stream=None, async_op=False):
        """Waits until every rank has arrived (CUDA backend: on `stream`, the device waits)."""
        if stream is None and not self._cpu:
            stream = 0
        return self._run(T.BARRIER, None, None, 0, 0, stream, async_op, None)

    def _scatter_shape(self, tensor):
        shape = T.shape_of(tensor)
        if shape is None:
            raise T.invalid("reduce_scatter: cannot tell the input's shape: pass out=", self._rank)
        w = self._world
        if shape and shape[0] % w == 0:
            return (shape[0] // w,) + shape[1:]
        n = 1
        for d in shape:
            n *= d
        if n % w:
            raise T.invalid(f"reduce_scatter: input of {n} elements does not split into {w} equal blocks",
                            self._rank)
        return (n // w,)

    # ---- host side --------------------------------------------------------------------
    def _host(self, fn, *args):
        ex = self._executor
        if ex is None:
            return fn(*args)
        return ex.submit(fn, *args).result()

    def allgather_bytes(self, blob):
        """Every rank's `blob` (bytes), as a list indexed by rank (over the bootstrap network)."""
        return self._host(self._c.allgather_bytes, bytes(blob))

    def host_barrier(self):
        """A barrier of the host threads over the bootstrap network (no device involved)."""
        self._host(self._c.host_barrier)

    # ---- suspend and resume (NCCL's ncclCommSuspend / ncclCommResume) ------------------
    def suspend(self):
        """Releases the communicator's memory between phases (colocated RL): the CUDA backend's
        VMM workspace and this process's mappings of every peer's, the CPU backend's shared
        segment. Collective (every rank, after its pending async calls, which it waits for); while
        suspended every call raises an UnsupportedError saying so, at once. resume() restores it."""
        self._host(self._c.suspend)

    def resume(self):
        """Makes the memory suspend() released again and re-exchanges it with the peers
        (collective). Registered buffers stay registered; recapture CUDA graphs made before."""
        self._host(self._c.resume)

    @property
    def suspended(self):
        return self._c.suspended

    def mem_stats(self):
        """{"suspendable_bytes", "persistent_bytes", "total_bytes", "suspended"}: the memory
        suspend() releases (0 while suspended), what stays until close, and the state (GPU memory
        on the CUDA backend, the shared segment on the CPU backend)."""
        return self._c.mem_stats()

    def register_buffer(self, tensor_or_ptr, nbytes=None):
        """Maps this buffer into every local peer (CUDA backend; no-op on CPU), so large
        all-reduces whose output lies in it store the all-gather straight into each rank's
        output. Collective: every rank registers (and deregisters) in the same order and uses
        the buffer at the same offset; a call whose ranks disagree raises InvalidArgument on
        every rank. Memory must come from cudaMalloc (PyTorch's default allocator, not
        expandable segments); other memory is accepted and served by the workspace path.
        Deregister before freeing the memory, and do not replay a CUDA graph captured with the
        buffer registered after deregistering it."""
        if nbytes is None:
            ptr, nbytes = T.nbytes(tensor_or_ptr)
        else:
            ptr = int(tensor_or_ptr)
        self._host(self._c.register_buffer, ptr, int(nbytes))

    def deregister_buffer(self, tensor_or_ptr):
        ptr = int(tensor_or_ptr) if isinstance(tensor_or_ptr, int) else T.nbytes(tensor_or_ptr)[0]
        self._host(self._c.deregister_buffer, ptr)

    def check(self):
        """Raises the group's error if there is one: on the CUDA backend that includes a kernel
        that gave up after its call returned (a peer stopped calling, an abort, ranks that
        disagreed; found by a watchdog within ~0.1 s), whose output is then incomplete. No
        synchronisation: call it after torch.cuda.synchronize() (or use synchronize()) before
        trusting a result nothing else waited on."""
        self._c.check()

    def synchronize(self, stream=None):
        """Waits for this rank's calls on `stream` (a torch/cupy stream or a raw handle; default:
        the legacy default stream), then check(). CPU backend: calls are synchronous, so this
        is check()."""
        if self._cpu:
            return self._host(self._c.check)
        s = 0 if stream is None else T.stream_handle(stream, self._rank)
        self._c.synchronize(s)

    def _refuse(self, error):
        """Tells the other ranks that this rank refused a call with `error` (the group is aborted,
        naming this rank and the reason), unless this communicator is closed or aborted already
        (the library refuses its own findings itself). The caller then raises `error`."""
        # Suspended: every rank is (suspend() is collective), so no peer waits in the call.
        if self._c.closed or self._c.aborted or self._c.suspended:
            return
        msg = str(error)
        try:
            self._c.refuse(msg[len(_ERROR_PREFIX):] if msg.startswith(_ERROR_PREFIX) else msg)
        except T.InvalidArgumentError:
            pass  # the same refusal, now told to the others

    # ---- elastic membership (docs/elastic.md) ------------------------------------------
    def _wrap(self, c):
        new = type(self).__new__(type(self))
        new._setup(c)
        return new

    def shrink(self, exclude, join_timeout=None):
        """A new Communicator of this group's ranks except `exclude` (ranks of this group),
        renumbered in order. Every survivor passes the same list. Works on a healthy group and on
        one aborted because a rank died (nothing waits for an excluded rank, nor for the process
        hosting this group's root). Once the new group formed, this one is revoked: its later
        calls raise RemoteError; close it. Ranks this group's root reported lost are excluded too
        (two ranks killed together: `exclude=err.culprits`, or just the first error's culprit). A
        shrink that fails because a survivor died meanwhile raises within seconds naming it
        (`.culprit`; `.culprits` every rank known lost, this group's numbering); shrink again
        with those excluded too."""
        ex = [int(r) for r in exclude]
        return self._wrap(self._host(self._c.shrink, ex, _seconds(join_timeout, "join_timeout")))

    def grow_id(self):
        """A single-use UniqueId for a grown group whose root this process hosts; give it to the
        newcomers (which join with Communicator(uid, rank, world_size)) and pass it to grow()."""
        return self._c.grow_id()

    def grow(self, world_size, uid=None, rank=None, join_timeout=None):
        """A new Communicator of `world_size` ranks: every rank of this group (collective over
        it) plus newcomers. Ranks that pass no `uid` take the one another rank passed. `rank`:
        this rank's number in the grown group (default: its number here). This communicator
        stays usable; close it once the grown one is ready."""
        if isinstance(uid, str):
            uid = UniqueId.parse(uid)
        return self._wrap(self._host(self._c.grow, int(world_size), uid, -1 if rank is None else int(rank),
                                     _seconds(join_timeout, "join_timeout")))

    def abort(self, reason="abort() called"):
        """Makes every rank's pending and later calls fail with a RemoteError naming this rank.
        Safe to call from another thread while a call is blocked."""
        self._c.abort(str(reason))

    def close(self):
        """Finishes pending async calls, then leaves the group. Idempotent."""
        ex = self._executor
        if ex is not None:
            ex.shutdown(wait=True)
            self._executor = None
        if self._c is not None:  # None: released at the interpreter's exit
            self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        # Leaving the block on an error raised here: tell the other ranks now instead of
        # letting them wait for their timeout. Not on an error the group itself raised (another
        # rank aborted, died or timed out): every rank already learns of that from the library,
        # naming the rank at fault, and an abort of ours would name *this* rank instead. It
        # could even overtake the first abort (a peer sees it through shared memory before the
        # root does), so that the other ranks would get this rank as the culprit.
        if exc is not None and not self.closed and not self.aborted and not isinstance(exc, _GROUP_ERRORS):
            try:
                self.abort(f"rank {self._rank} left its `with` block on {exc_type.__name__}: {exc}")
            except Exception:
                pass
        self.close()
        return False
