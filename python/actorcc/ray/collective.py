"""actorcc as a ray.util.collective backend ("ACTORCC", Ray versions with
register_collective_backend): the BaseGroup subclass (built on first use: it needs ray), its
Ray-native rendezvous (rank 0 publishes the UniqueId through a named actor), register_backend,
create_collective_group from the driver and the elastic steps of such a group."""
from __future__ import annotations

import time

from .. import _tensors as T
from .._actorcc import InvalidArgumentError, UniqueId
from ..communicator import Communicator
from . import elastic as _E
from .groups import _await_joins, _node_ip, _ray, _use_ray_node_id

__all__ = ["BACKEND_NAME", "register_backend", "register_backend_on", "create_collective_group",
           "shrink_collective_group", "grow_collective_group", "rejoin_collective_group"]

BACKEND_NAME = "ACTORCC"

# ray.util.collective groups whose UniqueId was handed over by create_collective_group.
_PENDING = {}

_group_cls = None
_backend_defaults = {}


def _backend_class():
    """The BaseGroup subclass (built on first use: it needs ray)."""
    global _group_cls
    if _group_cls is not None:
        return _group_cls
    _ray()
    from ray.util.collective.collective_group.base_collective_group import BaseGroup

    class ActorccGroup(BaseGroup):
        """ray.util.collective group on actorcc. One tensor per process (the *_multigpu
        calls are not supported)."""

        def __init__(self, world_size, rank, group_name):
            super().__init__(world_size, rank, group_name)
            opts = dict(_backend_defaults)
            pending = _PENDING.pop(group_name, None)
            if pending is not None:
                uid, extra = pending
                opts.update(extra)
            else:
                uid = _rendezvous(group_name, rank, opts.get("join_timeout") or 60.0)
            _use_ray_node_id()
            self._comm = Communicator(uid, rank, world_size, **opts)
            _E.joined("collective", group_name, rank, world_size)
            if pending is None and rank == 0:
                _drop_store(group_name)  # every rank has read the id: it joined

        def _replace(self, comm):
            """After an elastic shrink or grow: this group runs on `comm` from now on."""
            self._comm = comm
            self._rank = comm.rank
            self._world_size = comm.world_size

        @classmethod
        def backend(cls):
            return BACKEND_NAME

        @classmethod
        def check_backend_availability(cls):
            return True

        @property
        def communicator(self):
            return self._comm

        def destroy_group(self):
            _E.left("collective", self._group_name)
            self._comm.close()

        @staticmethod
        def _one(tensors):
            if isinstance(tensors, (list, tuple)):
                if len(tensors) != 1:
                    raise NotImplementedError("actorcc backend: exactly one tensor per process")
                return tensors[0]
            return tensors

        def allreduce(self, tensors, allreduce_options=None):
            op = getattr(allreduce_options, "reduceOp", "sum") if allreduce_options is not None else "sum"
            self._comm.all_reduce(self._one(tensors), op=op)

        def barrier(self, barrier_options=None):
            self._comm.host_barrier()

        def reduce(self, tensors, reduce_options=None):
            t = self._one(tensors)
            op = getattr(reduce_options, "reduceOp", "sum")
            root = getattr(reduce_options, "root_rank", 0)
            self._comm.reduce(t, root=root, op=op)  # non-root buffers stay unchanged, as in NCCL

        def allgather(self, tensor_lists, tensors, allgather_options=None):
            t = self._one(tensors)
            outs = tensor_lists[0] if tensor_lists and isinstance(tensor_lists[0], (list, tuple)) else tensor_lists
            if len(outs) != self.world_size:
                raise InvalidArgumentError(f"allgather: expected {self.world_size} output tensors, got {len(outs)}")
            flat = self._comm.all_gather(t)
            parts = flat.reshape((self.world_size,) + tuple(T.shape_of(t)))
            for i, dst in enumerate(outs):
                dst[...] = parts[i]

        def broadcast(self, tensors, broadcast_options=None):
            root = getattr(broadcast_options, "root_rank", 0)
            self._comm.broadcast(self._one(tensors), root=root)

        def reducescatter(self, tensors, tensor_lists, reducescatter_options=None):
            out = self._one(tensors)
            ins = tensor_lists[0] if tensor_lists and isinstance(tensor_lists[0], (list, tuple)) else tensor_lists
            if len(ins) != self.world_size:
                raise InvalidArgumentError(f"reducescatter: expected {self.world_size} input tensors, got {len(ins)}")
            op = getattr(reducescatter_options, "reduceOp", "sum")
            self._comm.reduce_scatter(_concat(ins), out=out, op=op)

        # Blocking, as ray.util.collective's NCCL backend: send returns once the peer has the
        # data, so two actors that send to each other must order their calls (or use
        # actorcc.ray.get_group(...).batch_send_recv through create_group).
        def send(self, tensors, send_options):
            t = _first_elements(self._one(tensors), getattr(send_options, "n_elements", 0))
            self._comm.send(t, send_options.dst_rank)

        def recv(self, tensors, recv_options):
            t = _first_elements(self._one(tensors), getattr(recv_options, "n_elements", 0))
            self._comm.recv(t, recv_options.src_rank)

    _group_cls = ActorccGroup
    return ActorccGroup


def _first_elements(t, n):
    """The first n elements of t as a flat view (all of t for n == 0), as n_elements means."""
    n = int(n or 0)
    return t.reshape(-1)[:n] if n > 0 else t


def _concat(tensors):
    first = tensors[0]
    if T.is_torch(first):
        return T._torch.cat([t.reshape(-1) for t in tensors])
    root = T.module_root(first)
    if root == "cupy":
        import cupy
        return cupy.concatenate([t.reshape(-1) for t in tensors])
    import numpy
    return numpy.concatenate([numpy.asarray(t).reshape(-1) for t in tensors])


def _store_name(group_name):
    return f"actorcc_uid:{group_name}"


def _rendezvous(group_name, rank, join_timeout):
    """Ray-native init: rank 0 makes the UniqueId and publishes it through a named detached
    actor; the others wait for it (bounded by join_timeout)."""
    ray = _ray()
    from ray.util.collective.util import NCCLUniqueIDStore  # a plain id store, backend-agnostic

    name = _store_name(group_name)
    if rank == 0:
        _drop_store(group_name)  # a stale one from a failed earlier group
        uid = UniqueId.create(_node_ip())
        store = NCCLUniqueIDStore.options(name=name, lifetime="detached", num_cpus=0).remote(name)
        ray.get(store.set_id.remote(str(uid)))
        return uid
    deadline = time.monotonic() + join_timeout
    while True:
        try:
            store = ray.get_actor(name)
            break
        except ValueError:
            if time.monotonic() > deadline:
                raise _timeout(f"ray.util.collective group {group_name!r}: rank 0 did not publish the "
                               f"actorcc UniqueId within {join_timeout:.0f}s", rank)
            time.sleep(0.05)
    left = max(1.0, deadline - time.monotonic())
    try:
        text = ray.get(store.wait_and_get_id.remote(), timeout=left)
    except ray.exceptions.GetTimeoutError:
        raise _timeout(f"ray.util.collective group {group_name!r}: no UniqueId from rank 0 within "
                       f"{join_timeout:.0f}s", rank) from None
    return UniqueId.parse(text)


_timeout = _E.timeout_error


def _drop_store(group_name):
    ray = _ray()
    try:
        ray.kill(ray.get_actor(_store_name(group_name)))
    except Exception:
        pass


def register_backend(*, timeout=None, join_timeout=None, backend=None, **options):
    """Registers actorcc as the ray.util.collective backend "ACTORCC" in this process (call it
    in the driver and in every actor; idempotent). Keyword options become the defaults of the
    groups made here (timeout, join_timeout, backend, device, algo, checked). Raises
    UnsupportedError when the installed Ray has no register_collective_backend."""
    ray = _ray()
    try:
        from ray.util.collective import register_collective_backend
        from ray.util.collective.backend_registry import _global_registry
    except ImportError:
        from .._actorcc import UnsupportedError
        raise UnsupportedError(
            f"ray {ray.__version__} has no ray.util.collective.register_collective_backend; "
            "use actorcc.ray.create_group instead") from None
    for k, v in (("timeout", timeout), ("join_timeout", join_timeout), ("backend", backend)):
        if v is not None:
            _backend_defaults[k] = v
    _backend_defaults.update(options)
    if not _global_registry.is_registered(BACKEND_NAME):
        register_collective_backend(BACKEND_NAME, _backend_class())
    return BACKEND_NAME


def _register_in_actor(actor_self, defaults):
    return register_backend(**defaults)


def register_backend_on(actors, **defaults):
    """register_backend() inside every actor (from the driver)."""
    ray = _ray()
    return ray.get([a.__ray_call__.remote(_register_in_actor, defaults) for a in actors])


def _init_collective(actor_self, group_name, uid, rank, world, defaults, options):
    register_backend(**defaults)
    from ray.util.collective import init_collective_group
    _PENDING[group_name] = (UniqueId.parse(uid), options)
    try:
        init_collective_group(world, rank, backend=BACKEND_NAME, group_name=group_name)
    finally:
        _PENDING.pop(group_name, None)
    return rank


def create_collective_group(actors, group_name="default", *, timeout=None, join_timeout=60.0, backend="auto",
                            host=None, grace=15.0, **options):
    """From the driver: registers the backend in every actor and forms a ray.util.collective
    group named `group_name` on actorcc (UniqueId made here, all actors join concurrently).
    Afterwards the actors use ray.util.collective.allreduce(..., group_name=group_name) etc.
    Failures as create_group: GroupJoinError naming the actors that did not join (a dead one
    at once)."""
    started = time.monotonic()
    register_backend()
    actors = list(actors)
    uid = UniqueId.create(_node_ip() if host is None else host)
    opts = dict(options, timeout=timeout, join_timeout=join_timeout, backend=backend)
    refs = [a.__ray_call__.remote(_init_collective, group_name, str(uid), r, len(actors), {}, opts)
            for r, a in enumerate(actors)]
    out = _await_joins(actors, refs, f"actorcc.ray.create_collective_group({group_name!r})", join_timeout, grace,
                       leave=lambda a: a.__ray_call__.remote(_destroy_collective, group_name), started=started)
    _E.record("collective", group_name, actors, opts)  # for restarted actors (rejoin_collective_group)
    return out


def _collective_group(group_name):
    """This process's ray.util.collective group object of `group_name` on actorcc (a restarted
    actor's rejoin in progress is waited for)."""
    _E.pending("collective", group_name)
    from ray.util.collective.collective import _group_mgr
    g = _group_mgr.get_group_by_name(group_name) if _group_mgr.is_group_exist(group_name) else None
    if g is None or not hasattr(g, "_replace"):
        raise InvalidArgumentError(f"this process has no ray.util.collective group {group_name!r} "
                                   "on the actorcc backend")
    return g


def shrink_collective_group(group_name="default", exclude=None, join_timeout=None):
    """shrink_group for a ray.util.collective group on actorcc: the survivors' group object runs
    on the shrunk communicator (ray.util.collective.get_rank etc. give the new numbering)."""
    g = _collective_group(group_name)
    g._replace(_E.shrink("collective", group_name, g.communicator, exclude, join_timeout))
    return g.communicator


def grow_collective_group(group_name="default", wait=0.0, expect=None, join_timeout=None):
    """grow_group for a ray.util.collective group on actorcc (collective over its members)."""
    if _E.grown_in("collective", group_name):
        return _collective_group(group_name).communicator
    g = _collective_group(group_name)
    g._replace(_E.grow("collective", group_name, g.communicator, wait, expect, join_timeout))
    return g.communicator


def rejoin_collective_group(group_name="default", join_timeout=None):
    """rejoin_group for a ray.util.collective group made by create_collective_group: in the
    restarted actor's constructor; the group is registered with ray.util.collective once the
    members have grown (grow_collective_group)."""
    register_backend()

    def install(uid, rank, world, opts):
        _init_collective(None, group_name, uid, rank, world, {}, opts)

    return _E.rejoin("collective", group_name, install, join_timeout)


def _destroy_collective(actor_self, group_name):
    from ray.util.collective import destroy_collective_group
    destroy_collective_group(group_name)
