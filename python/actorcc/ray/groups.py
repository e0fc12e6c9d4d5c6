"""Groups of Ray actors formed from the driver (create_group): the actors' joins through
__ray_call__, the driver's wait for them (GroupJoinError naming the actors that did not join),
get_group/destroy_group, the elastic steps of such a group (shrink, grow, rejoin: elastic.py
keeps the membership), and run_on/doctor over a list of actors."""
from __future__ import annotations

import os
import socket
import sys
import time

from .._actorcc import Error, InvalidArgumentError, UniqueId
from ..communicator import Communicator
from . import elastic as _E

__all__ = ["create_group", "get_group", "destroy_group", "GroupJoinError", "doctor", "shrink_group",
           "grow_group", "rejoin_group", "group_members", "run_on"]

# A driver waiting this long for the actors' joins says once why (their processes starting).
NOTICE_AFTER_S = 3.0

# Groups this process belongs to (inside an actor): name -> Communicator.
_GROUPS = {}


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
        from ..doctor.ray_hook import doctor as _doctor
    except ImportError:
        raise NotImplementedError("actorcc.ray.doctor is not available in this build") from None
    return _doctor(actors, **kwargs)
