"""Ray integration: groups of actors, and actorcc as a ``ray.util.collective`` backend.

Importing this module does not import ray; ray is needed only when a function is called.

From the driver, any actors (no special base class or method needed):

    import actorcc.ray
    actorcc.ray.create_group(actors, name="train", join_timeout=120)
    # inside each actor's methods:
    comm = actorcc.ray.get_group("train")      # an actorcc.Communicator
    comm.all_reduce(tensor)

create_group makes one UniqueId on the driver (the group's root runs in the driver process
for the group's whole life: if the driver exits, every actor's calls on the group fail at
once with RemoteError), then every actor joins concurrently through
``actor.__ray_call__`` (which Ray adds to every actor class), so actors may start in any order
and seconds apart. It returns when all have joined, or raises GroupJoinError naming the actors
that did not (dead, busy, or unable to join) and what every other one reported.

Elastic groups (docs/elastic.md, "Ray"): when an actor dies, the others' calls raise naming
its rank; they call ``actorcc.ray.shrink_group(name)`` and go on without it. An actor Ray
restarts (max_restarts > 0) calls ``actorcc.ray.rejoin_group(name)`` in its constructor, and the
members' next ``actorcc.ray.grow_group(name)`` takes it back at its original rank (the
membership lives in Ray's KV store). The same for ray.util.collective groups:
``shrink_collective_group``, ``rejoin_collective_group``, ``grow_collective_group``.

actorcc's libnccl.so.2 (NCCL's C API on actorcc) in actors, so their torch "nccl" groups, vLLM
and CuPy use actorcc unchanged (docs/nccl-use.md):

    actor = Trainer.options(runtime_env=actorcc.ray.nccl_runtime_env({...your runtime_env...})).remote()

ray.util.collective (Ray versions with ``register_collective_backend``):

    actorcc.ray.register_backend()           # in the driver, and in every actor (or:)
    actorcc.ray.create_collective_group(actors, group_name="g")   # does both, from the driver
    # inside actors: ray.util.collective.allreduce(tensor, group_name="g"), etc.

or the Ray-native flow: each actor calls ``actorcc.ray.register_backend()`` then
``ray.util.collective.init_collective_group(world, rank, backend="ACTORCC", group_name=...)``
(rank 0 publishes the UniqueId through a named actor); ``ray.util.collective.
create_collective_group(..., backend="ACTORCC")`` from the driver works as well once the
backend is registered in the actors (``register_backend_on(actors)``).
"""
from __future__ import annotations

import os
import socket
import sys
import time

from . import _tensors as T
from ._actorcc import Error, InvalidArgumentError, UniqueId
from . import _ray_elastic as _E
from .communicator import Communicator
from .ray_transport import register_tensor_transport  # noqa: F401 - Ray Direct Transport "ACTORCC"

__all__ = [
    "create_group", "get_group", "destroy_group", "GroupJoinError", "register_backend",
    "register_backend_on", "create_collective_group", "BACKEND_NAME", "doctor", "nccl_runtime_env",
    "shrink_group", "grow_group", "rejoin_group", "group_members",
    "shrink_collective_group", "grow_collective_group", "rejoin_collective_group",
]

BACKEND_NAME = "ACTORCC"

# A driver waiting this long for the actors' joins says once why (their processes starting).
NOTICE_AFTER_S = 3.0

# Groups this process belongs to (inside an actor): name -> Communicator.
_GROUPS = {}
# ray.util.collective groups whose UniqueId was handed over by create_collective_group.
_PENDING = {}


class GroupJoinError(Error):
    """create_group failed. .missing: {rank: reason} for the actors that did not join;
    .reports: {rank: what the actor raised} for every actor that raised."""

    def __init__(self, message, missing=None, reports=None):
        super().__init__(message)
        self.missing = dict(missing or {})
        self.reports = dict(reports or {})
        self.rank = min(self.missing) if self.missing else -1
        self.code = "join"


def _ray():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - exercised only without ray
        raise ImportError("actorcc.ray needs Ray: pip install ray") from e
    return ray


def _node_ip():
    """This node's address as Ray sees it ('' lets actorcc pick)."""
    try:
        return _ray().util.get_node_ip_address()
    except Exception:
        return ""


def _use_ray_node_id():
    """Inside an actor: makes Ray's node id this process's node identity (ACTORCC_NODE_ID), so
    actors on nodes that share a host name (ray.cluster_utils.Cluster, containers with one
    hostname) are still told apart, and actors of one node are grouped by what Ray schedules
    on. An ACTORCC_NODE_ID already set (virtual nodes, tests) wins. Returns the identity used."""
    if os.environ.get("ACTORCC_NODE_ID"):
        return os.environ["ACTORCC_NODE_ID"]
    try:
        node_id = _ray().get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - not inside Ray: actorcc's own host identity stands
        return None
    if node_id:
        os.environ["ACTORCC_NODE_ID"] = f"ray-{node_id}"
    return os.environ.get("ACTORCC_NODE_ID")


def _actor_name(actor):
    try:
        return f"{type(actor).__name__}({actor._actor_id.hex()[:12]})"
    except Exception:
        return repr(actor)


# ---- functions that run inside the actors (through __ray_call__) -------------------------

def _join(actor_self, name, uid, rank, world, kwargs):
    old = _GROUPS.get(name)
    if old is not None and not old.closed:
        raise InvalidArgumentError(f"actorcc group {name!r} already exists in this actor (rank {old.rank}); "
                                   "destroy_group it first")
    _use_ray_node_id()
    comm = Communicator(uid, rank, world, **kwargs)
    _GROUPS[name] = comm
    _E.joined("group", name, rank, world)
    return _describe(comm)


def _describe(comm):
    return {"rank": comm.rank, "world_size": comm.world_size, "backend": comm.backend, "device": comm.device,
            "pid": os.getpid(), "hostname": socket.gethostname(), "node_id": os.environ.get("ACTORCC_NODE_ID"),
            "num_nodes": comm.num_nodes,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


def _leave(actor_self, name):
    _E.left("group", name)
    comm = _GROUPS.pop(name, None)
    if comm is not None:
        comm.close()
    return comm is not None


def _call(actor_self, fn, args, kwargs):
    return fn(*args, **kwargs)


# ---- driver side ---------------------------------------------------------------------

def create_group(actors, name="default", *, timeout=None, join_timeout=60.0, backend="auto", device=None,
                 host=None, grace=15.0, **options):
    """Forms an actorcc group of `actors` (rank = position in the list) from the driver.

    timeout: the per-call bound inside the group (seconds; default actorcc's 300).
    join_timeout: how long the actors may take to arrive (they may still be starting).
    host: the address the root (in this driver process) listens on; default Ray's node IP.
    Other keyword options go to actorcc.Communicator (algo, checked, workspace_bytes).
    Returns [dict(rank, backend, device, pid, hostname, cuda_visible_devices)] by rank.
    Raises GroupJoinError naming the actors that did not join (an actor that dies while
    joining is reported at once; the others fail their join within join_timeout).
    """
    started = time.monotonic()
    _ray()
    actors = list(actors)
    world = len(actors)
    if world < 1:
        raise InvalidArgumentError("create_group: no actors")
    missing_call = [i for i, a in enumerate(actors) if not hasattr(a, "__ray_call__")]
    if missing_call:
        raise InvalidArgumentError(f"create_group: actor(s) at rank {missing_call} have no __ray_call__ "
                                   "(needs Ray >= 2.x actor handles)")
    uid = UniqueId.create(_node_ip() if host is None else host)
    kwargs = dict(options, timeout=timeout, join_timeout=join_timeout, backend=backend, device=device)
    refs = [a.__ray_call__.remote(_join, name, str(uid), r, world, kwargs) for r, a in enumerate(actors)]
    infos = _await_joins(actors, refs, f"actorcc.ray.create_group({name!r})", join_timeout, grace,
                         leave=lambda a: a.__ray_call__.remote(_leave, name), started=started)
    _E.record("group", name, actors, kwargs)  # for restarted actors (rejoin_group)
    return infos


def _say(text):
    print(text, file=sys.stderr, flush=True)


def _await_joins(actors, refs, what, join_timeout, grace, leave, started=None):
    """Waits for the join calls `refs` (one per actor, by rank) and returns their results, or
    raises GroupJoinError naming the actors that did not join. An actor that dies or cannot
    run its call is named as soon as Ray reports it (the others' joins then fail by
    themselves within join_timeout); `leave(actor)` is sent to those that had joined. A wait
    longer than NOTICE_AFTER_S is explained once on stderr (new actors' processes are still
    starting: Ray's worker start and its import of ray and actorcc are the cost, seconds to tens
    of seconds on a busy machine), and its end is timed."""
    ray = _ray()
    world = len(actors)
    index = {ref: r for r, ref in enumerate(refs)}
    results, reports, missing = {}, {}, {}
    pending = list(refs)
    started = time.monotonic() if started is None else started
    deadline = time.monotonic() + join_timeout + grace
    noticed = False
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        if not noticed:
            until_notice = started + NOTICE_AFTER_S - time.monotonic()
            if until_notice <= 0:
                noticed = True
                waiting = sorted(index[ref] for ref in pending)
                _say(f"{what}: waiting for {len(pending)} of {world} actor(s) to join "
                     f"({time.monotonic() - started:.1f} s so far; bounded by join_timeout={join_timeout:g} s):"
                     + "".join(f"\n  rank {r} {_actor_name(actors[r])}: {_whereabouts(actors[r])}" for r in waiting))
            else:
                left = min(left, until_notice)
        ready, pending = ray.wait(pending, num_returns=1, timeout=left)
        for ref in ready:
            r = index[ref]
            try:
                results[r] = ray.get(ref)
            except Exception as e:  # noqa: BLE001
                cause = getattr(e, "cause", None) or e
                reports[r] = f"{type(cause).__name__}: {cause}"
                if not isinstance(cause, Error):
                    # the actor died or could not run the call: it will never join
                    missing[r] = f"actor failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if missing:
            break
    stopped_early = bool(missing)  # on a dead actor: the others are still inside their join
    for ref in pending:
        r = index[ref]
        if stopped_early:
            reports[r] = f"still joining (its join fails by itself within join_timeout={join_timeout:.0f}s)"
        else:
            missing[r] = f"did not join within {join_timeout:.0f}s (busy, still starting, or hung)"
    if noticed:
        _say(f"{what}: {len(results)} of {world} actor(s) joined after {time.monotonic() - started:.1f} s")
    if not missing and len(results) == world:
        return [results[r] for r in range(world)]
    if not missing:
        # every actor ran the join but some failed: the ranks their errors name are the culprits
        for r, msg in reports.items():
            for m in _named_ranks(msg):
                if 0 <= m < world:
                    missing.setdefault(m, reports.get(m) or f"never reached the group's root (named by rank {r})")
        if not missing:
            missing = {r: msg for r, msg in reports.items()}
    for r in results:  # leave the half-formed group
        leave(actors[r])
    n_missing = len(missing)
    lines = [f"  rank {r} {_actor_name(actors[r])}: {why}" for r, why in sorted(missing.items())]
    others = [f"  rank {r}: {msg}" for r, msg in sorted(reports.items()) if r not in missing]
    msg = f"{what}: {n_missing} of {world} actor(s) did not join:\n" + "\n".join(lines)
    if others:
        msg += "\nreported by the others:\n" + "\n".join(others)
    raise GroupJoinError(msg, missing, reports)


def _whereabouts(actor):
    """What an actor whose join has not returned is doing, as far as Ray's actor table (GCS, no
    dashboard needed) tells: not started yet, in its constructor, or running (its join queued
    behind its earlier calls, or under way)."""
    try:
        from ray._private import state
        info = state.actors(actor._actor_id.hex()) or {}
    except Exception:  # noqa: BLE001 - another Ray: say what is certain
        info = {}
    st, pid = info.get("State"), info.get("Pid") or 0
    if st == "ALIVE":
        return (f"running (pid {pid}, its constructor done): the join call is queued behind the actor's earlier "
                "calls, or under way (importing what it needs, or waiting for the others)")
    if st in ("PENDING_CREATION", "DEPENDENCIES_UNREADY") and pid:
        return f"its process (pid {pid}) is still in the actor's constructor (__init__); the join comes after it"
    if st in ("PENDING_CREATION", "DEPENDENCIES_UNREADY"):
        return "Ray has not started its worker process yet (resources, or the worker's start and imports)"
    if st == "RESTARTING":
        return "Ray is restarting it"
    if st == "DEAD":
        return "dead (Ray's error for its call follows)"
    return "Ray does not say where it is" + (f" (state {st})" if st else "")


def _named_ranks(msg):
    """Ranks an actorcc join/timeout message names as missing ("ranks 1, 2 of 4 did not
    join", "waiting for rank(s) 3")."""
    import re
    out = set()
    for pat in (r"ranks? ([\d, ]+) of \d+ did not join", r"waiting for rank\(?s?\)? ([\d, ]+)",
                r"failed on rank\(s\) ([\d, ]+)"):
        for m in re.finditer(pat, msg):
            out.update(int(x) for x in re.findall(r"\d+", m.group(1)))
    return out


def get_group(name="default"):
    """Inside an actor: the Communicator of group `name` (made by create_group). In a restarted
    actor whose rejoin_group(name) is in progress: waits for it (until its join timeout)."""
    _E.pending("group", name)
    comm = _GROUPS.get(name)
    if comm is None or comm.closed:
        raise InvalidArgumentError(f"this process is not in an actorcc group named {name!r} "
                                   f"(groups here: {sorted(_GROUPS)})")
    return comm


def destroy_group(actors=None, name="default"):
    """From the driver with `actors`: every actor leaves group `name`. Inside an actor
    (actors=None): this process leaves it."""
    if actors is None:
        return _leave(None, name)
    ray = _ray()
    out = ray.get([a.__ray_call__.remote(_leave, name) for a in actors])
    _E.forget("group", name)
    return out


# ---- elastic membership (docs/elastic.md, "Ray") ----------------------------------------

def shrink_group(name="default", exclude=None, join_timeout=None):
    """Inside every surviving actor of group `name` (collective over the survivors): replaces the
    group by the shrunk communicator of the survivors, renumbered in the order of their original
    ranks, and returns it (get_group(name) returns it from now on; the old one is closed).

    exclude: ranks of the current group to drop; None = the ranks the group's error lists (its
    .culprits: the actors that died, several when killed together). Every rank the group's root
    reported lost is dropped in any case, so no survivor waits for a dead one. Every survivor
    must pass the same list (as with Communicator.shrink). A survivor that dies during the shrink
    is named within seconds, excluded too and the shrink retried. A healthy group shrinks only with an explicit exclude (a planned
    shrink; the excluded actors' later calls on the old group raise RemoteError "revoked")."""
    comm = get_group(name)
    _GROUPS[name] = new = _E.shrink("group", name, comm, exclude, join_timeout)
    return new


def grow_group(name="default", wait=0.0, expect=None, join_timeout=None):
    """Inside every member of group `name` (collective over them, e.g. at the start of each step):
    takes back every restarted actor that called rejoin_group(name), each at its original place,
    and returns the (grown or unchanged) communicator. The members' rank 0 looks for requests in
    Ray's KV store, waiting up to `wait` seconds for at least one (or, with `expect`, until the
    group would have `expect` ranks); with none, nothing changes. In a restarted actor whose
    rejoin is in progress (or done, but not yet met by a grow_group call) this waits for its
    join and returns: that call is its share of the members' grow (so one step function fits
    both)."""
    if _E.grown_in("group", name):
        return get_group(name)
    comm = get_group(name)
    _GROUPS[name] = new = _E.grow("group", name, comm, wait, expect, join_timeout)
    return new


def rejoin_group(name="default", join_timeout=None):
    """In an actor's constructor: when Ray restarted this actor (max_restarts > 0) and it was a
    member of group `name`, asks the members to take it back at its original rank and joins in
    the background (the constructor returns at once; get_group/grow_group wait for the join,
    which happens when the members call grow_group). Returns True if it asked, False when this
    actor was never a member (its first start: create_group adds it later)."""
    _ray()

    def install(uid, rank, world, opts):
        _use_ray_node_id()
        _GROUPS[name] = Communicator(uid, rank, world, **opts)

    return _E.rejoin("group", name, install, join_timeout)


def group_members(name="default"):
    """Inside an actor: the original ranks (create_group's) of group `name`'s members, by current rank."""
    _E.pending("group", name)
    return _E.members_of("group", name)


def run_on(actors, fn, *args, **kwargs):
    """Runs fn(*args, **kwargs) in every actor concurrently and returns the results."""
    ray = _ray()
    return ray.get([a.__ray_call__.remote(_call, fn, args, kwargs) for a in actors])


def doctor(actors, **kwargs):
    """Diagnoses the actors' GPUs, masking and links: the group doctor run inside every actor
    (implemented in actorcc/doctor/ray_hook.py; keywords as actorcc.doctor)."""
    try:
        from .doctor.ray_hook import doctor as _doctor
    except ImportError:
        raise NotImplementedError("actorcc.ray.doctor is not available in this build") from None
    return _doctor(actors, **kwargs)


# ---- actorcc's libnccl.so.2 in actors -------------------------------------------------

# Variables that hold a list of files: actorcc's entry goes first, the caller's stay after it.
_PATH_LISTS = {"LD_PRELOAD": ":", "LD_AUDIT": ":"}


def nccl_runtime_env(base=None, mode="preload"):
    """The runtime_env that makes Ray actors' torch, CuPy and vLLM load actorcc's libnccl.so.2
    (actorcc/nccl.py: mode "preload" sets LD_PRELOAD, "audit" LD_AUDIT; both VLLM_NCCL_SO_PATH),
    merged into `base` (a runtime_env dict, not changed) without losing any of its keys:

        actor = Trainer.options(runtime_env=actorcc.ray.nccl_runtime_env({"pip": [...]})).remote()
        ray.init(runtime_env=actorcc.ray.nccl_runtime_env())   # every worker of the job

    An LD_PRELOAD or LD_AUDIT already in base's env_vars is kept, after actorcc's entry. A base
    that sets VLLM_NCCL_SO_PATH or ACTORCC_NCCL_ABI_LIB to another file raises ValueError (the
    actors would mix two NCCLs). The paths are this (the driver's) machine's: the actors must
    see actorcc installed at the same place, as with one image or one virtualenv everywhere."""
    from . import nccl

    out = dict(base or {})
    env_vars = dict(out.get("env_vars") or {})
    for key, value in nccl.env(mode).items():
        old = env_vars.get(key)
        if not old or old == value:
            env_vars[key] = value
        elif key in _PATH_LISTS:
            sep = _PATH_LISTS[key]
            env_vars[key] = sep.join([value] + [p for p in old.split(sep) if p and p != value])
        else:
            raise ValueError(f"nccl_runtime_env: the runtime_env sets {key}={old!r}, but actorcc's NCCL needs "
                             f"{key}={value!r}; drop it from env_vars")
    out["env_vars"] = env_vars
    return out


# ---- ray.util.collective backend ------------------------------------------------------

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
        from ._actorcc import UnsupportedError
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
