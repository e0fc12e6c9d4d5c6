"""Elastic membership for groups of Ray actors (docs/elastic.md, "Ray"): the survivors of a dead
actor shrink the group, and the actor, once Ray restarts it, rejoins by name and the members grow
to take it back. Re-exported by actorcc.ray; used for both create_group groups ("group") and the
ray.util.collective backend ("collective").

Where the membership lives: Ray's internal key-value store (the GCS, through
ray.experimental.internal_kv), namespace "actorcc", keys `<kind>:<job>:<name>...`:
  - the record  {"world": N, "ranks": {actor id: original rank}, "members": [original ranks],
                 "options": {Communicator keywords}}: written by the driver when the group forms,
                 "members" kept up to date by each new group's rank 0. It outlives any actor, so a
                 restarted actor (Ray keeps its actor id) finds its original rank there.
  - `:rejoin:<orig>`  a restarted actor's request to come back (written by rejoin_group).
  - `:ticket:<orig>`  the grown group's id, size and this actor's rank in it (written by the
                 members' rank 0 in grow_group, read by the newcomer).
No extra actor process is needed, and nothing is lost when an actor or the driver dies.

Ranks: members are kept in the order of their original ranks. A shrunk group renumbers the
survivors in that order; a grown group puts every newcomer back at its original place, so a group
grown back to full size has every actor at its original rank.
"""
from __future__ import annotations

import json
import threading
import time

from .._actorcc import InvalidArgumentError, RemoteError
from .._actorcc import TimeoutError as _ActorccTimeout

_NS = "actorcc"
_POLL_S = 0.02
# Membership of the groups this process belongs to: (kind, name) -> _Member.
_MEMBERS = {}


class _Member:
    def __init__(self, orig_rank, members):
        self.orig_rank = orig_rank
        self.members = list(members) if members is not None else None  # original ranks, by current rank
        self.join = None  # a restarted actor's join in progress: a _Join
        # The restarted actor joined through the members' grow, and has not called grow_group
        # since: its next grow_group is its share of that grow (not a new collective one).
        self.grown_in = False


class _Join(threading.Thread):
    """A restarted actor's join, in the background so that its constructor returns at once: waits
    for the ticket the members' rank 0 writes when they grow, then joins with it (`install` does
    the joining and registers the communicator)."""

    def __init__(self, kind, name, orig, deadline, install):
        super().__init__(name=f"actorcc-rejoin-{name}", daemon=True)
        self.kind, self.name, self.orig, self.deadline, self.install = kind, name, orig, deadline, install
        self.error = None
        self.members = None

    def run(self):
        try:
            key = _key(self.kind, self.name, "ticket", self.orig)
            while True:
                raw = _kv().get(key)
                if raw is not None:
                    break
                if time.monotonic() > self.deadline:
                    raise timeout_error(f"actorcc.ray.rejoin_group({self.name!r}): original rank {self.orig} asked "
                                        "to rejoin, but the members did not grow the group in time (call "
                                        "actorcc.ray.grow_group in every member)", self.orig)
                time.sleep(_POLL_S)
            _kv().delete(key)
            ticket = json.loads(raw)
            self.install(ticket["uid"], ticket["rank"], ticket["world"])
            self.members = ticket["members"]
        except BaseException as e:  # noqa: BLE001 - handed to the caller of finish()
            self.error = e

    def finish(self):
        self.join(max(0.0, self.deadline - time.monotonic()) + 5.0)
        if self.is_alive():
            raise timeout_error(f"actorcc.ray: the rejoin of group {self.name!r} did not finish in time", self.orig)
        if self.error is not None:
            raise self.error
        return self.members


def timeout_error(msg, rank):
    """An actorcc.TimeoutError raised here (not by the library), naming `rank`."""
    e = _ActorccTimeout(f"actorcc timeout error: {msg}")
    e.rank = e.observer_rank = rank
    e.code = "timeout"
    return e


class _KV:
    """ray.experimental.internal_kv in the "actorcc" namespace, str keys, JSON-able values."""

    def __init__(self):
        from ray.experimental import internal_kv
        self._kv = internal_kv

    def get(self, key):
        v = self._kv._internal_kv_get(key, namespace=_NS)
        return None if v is None else v.decode()

    def put(self, key, value):
        self._kv._internal_kv_put(key, value, overwrite=True, namespace=_NS)

    def delete(self, key, prefix=False):
        self._kv._internal_kv_del(key, del_by_prefix=prefix, namespace=_NS)

    def keys(self, prefix):
        return [k.decode() for k in self._kv._internal_kv_list(prefix, namespace=_NS)]


_kv_instance = None


def _kv():
    global _kv_instance
    if _kv_instance is None:
        _kv_instance = _KV()
    return _kv_instance


def _key(kind, name, *parts):
    import ray
    job = ray.get_runtime_context().get_job_id()
    return ":".join([kind, job, name] + [str(p) for p in parts])


def _jsonable(options):
    return {k: (v if v is None or isinstance(v, (bool, int, float, str)) else str(v)) for k, v in options.items()}


# ---- driver side ---------------------------------------------------------------------------

def record(kind, name, actors, options):
    """After a group formed (driver): its membership record, so that restarted actors find their rank."""
    rec = {"world": len(actors), "ranks": {a._actor_id.hex(): r for r, a in enumerate(actors)},
           "members": list(range(len(actors))), "options": _jsonable(options)}
    kv = _kv()
    kv.delete(_key(kind, name, ""), prefix=True)  # requests and tickets of an earlier group of this name
    kv.put(_key(kind, name), json.dumps(rec))


def forget(kind, name):
    """The group was destroyed (driver): its record, requests and tickets go."""
    kv = _kv()
    kv.delete(_key(kind, name))
    kv.delete(_key(kind, name, ""), prefix=True)


# ---- inside the actors ---------------------------------------------------------------------

def joined(kind, name, rank, world):
    """This actor joined group `name` as `rank` of `world` (its original rank). Not while a
    restarted actor's rejoin is installing the group (its ranks come from the ticket)."""
    m = _MEMBERS.get((kind, name))
    if m is None or m.join is None:
        _MEMBERS[(kind, name)] = _Member(rank, range(world))


def left(kind, name):
    _MEMBERS.pop((kind, name), None)


def _member(kind, name):
    m = _MEMBERS.get((kind, name))
    if m is None:
        raise InvalidArgumentError(f"this actor is not a member of the actorcc group {name!r}")
    return m


def pending(kind, name):
    """Waits for this restarted actor's join of `name` if one is in progress (then it is a member)."""
    m = _MEMBERS.get((kind, name))
    if m is None or m.join is None:
        return False
    try:
        m.members = m.join.finish()  # m.join stays set meanwhile: joined() leaves m alone
    except BaseException:
        _MEMBERS.pop((kind, name), None)
        raise
    m.join = None
    m.grown_in = True
    return True


def grown_in(kind, name):
    """Waits for a restarted actor's join (see pending); True once per rejoin: this grow_group call
    is the restarted actor's share of the grow that took it back."""
    pending(kind, name)
    m = _MEMBERS.get((kind, name))
    if m is None or not m.grown_in:
        return False
    m.grown_in = False
    return True


def rejoin(kind, name, install, join_timeout):
    """In a (restarted) actor: asks to rejoin `name` at its original rank and starts joining in the
    background. Returns False when this actor was never a member (its first start)."""
    import ray
    kv = _kv()
    raw = kv.get(_key(kind, name))
    if raw is None:
        return False
    rec = json.loads(raw)
    orig = rec["ranks"].get(ray.get_runtime_context().get_actor_id())
    if orig is None:
        return False
    opts = rec["options"]
    timeout = join_timeout or opts.get("join_timeout") or 600.0
    kv.delete(_key(kind, name, "ticket", orig))  # a stale ticket from before this restart
    kv.put(_key(kind, name, "rejoin", orig), json.dumps({"time": time.time()}))
    m = _Member(orig, None)
    m.join = _Join(kind, name, orig, time.monotonic() + float(timeout), lambda uid, r, w: install(uid, r, w, opts))
    _MEMBERS[(kind, name)] = m
    m.join.start()
    return True


def _update_members(kind, name, members):
    kv = _kv()
    raw = kv.get(_key(kind, name))
    if raw is not None:
        rec = json.loads(raw)
        rec["members"] = members
        kv.put(_key(kind, name), json.dumps(rec))


def culprits_of(comm):
    """The ranks the group's error lists as lost (its culprit first among them: ranks killed
    together are all listed), or raises: the group is healthy, or its error names no rank."""
    try:
        comm.check()
    except (RemoteError, _ActorccTimeout) as e:
        c = getattr(e, "culprit", -1)
        if c is None or c < 0 or c == comm.rank or c >= comm.world_size:
            raise InvalidArgumentError(f"shrink: the group's error names no other rank ({e}); "
                                       "pass exclude=[...]") from e
        return sorted({c, *(r for r in getattr(e, "culprits", ()) if 0 <= r < comm.world_size and r != comm.rank)})
    raise InvalidArgumentError("shrink: the group has no error (a healthy group): "
                               "pass exclude=[...] for a planned shrink")


def _lost(comm):
    """Every rank the group's error lists as lost ([] for a healthy group)."""
    try:
        comm.check()
    except (RemoteError, _ActorccTimeout) as e:
        return [r for r in getattr(e, "culprits", ()) if 0 <= r < comm.world_size and r != comm.rank]
    return []


def shrink(kind, name, comm, exclude, join_timeout):
    """Shrinks `comm` (this actor's communicator of group `name`) without `exclude` (ranks of
    comm; None = the rank the group's error names). A survivor that dies during the shrink is
    excluded too and the shrink retried. Returns the new communicator; the old one is closed."""
    m = _member(kind, name)
    ex = culprits_of(comm) if exclude is None else sorted({int(r) for r in exclude})
    ex = sorted(set(ex) | set(_lost(comm)))  # what the shrink excludes anyway: the same list here
    for _ in range(comm.world_size):
        try:
            new = comm.shrink(ex, join_timeout=join_timeout)
            break
        except (RemoteError, _ActorccTimeout) as e:
            # A survivor that died meanwhile is named within seconds, with every rank known lost.
            more = {getattr(e, "culprit", -1), *getattr(e, "culprits", ())}
            more = {r for r in more if r is not None and 0 <= r < comm.world_size and r != comm.rank} - set(ex)
            if not more:
                raise
            ex = sorted(set(ex) | more)
    # The shrink also excluded the ranks the old group's root reported lost: the new group's size
    # says how many went; which ones, the old group's error lists (every survivor's alike).
    if new.world_size != comm.world_size - len(ex):
        ex = sorted(set(ex) | set(_lost(comm)))
    m.members = [o for r, o in enumerate(m.members) if r not in ex]
    comm.close()
    if new.rank == 0:
        _update_members(kind, name, m.members)
    return new


def _requests(kind, name, members, wait, expect):
    """Original ranks that asked to rejoin (and are not members), waiting up to `wait` seconds for
    at least one, or for the group to reach `expect` ranks."""
    kv = _kv()
    prefix = _key(kind, name, "rejoin", "")
    deadline = time.monotonic() + float(wait or 0)
    while True:
        asked = sorted(int(k[len(prefix):]) for k in kv.keys(prefix))
        new = [o for o in asked if o not in members]
        enough = len(members) + len(new) >= expect if expect else bool(new)
        if enough or time.monotonic() >= deadline:
            return new
        time.sleep(_POLL_S)


def grow(kind, name, comm, wait, expect, join_timeout):
    """Collective over the members of `name`: takes back every restarted actor that asked to rejoin
    (rank 0 looks; `wait`/`expect` as in _requests) at its original place. Returns the grown
    communicator (the old one closed), or `comm` itself when nobody asked."""
    m = _member(kind, name)
    plan, uid = b"", None
    if comm.rank == 0:
        new = _requests(kind, name, m.members, wait, expect)
        if new:
            members = sorted(m.members + new)
            uid = comm.grow_id()
            kv = _kv()
            for o in new:
                kv.delete(_key(kind, name, "rejoin", o))
                ticket = {"uid": str(uid), "rank": members.index(o), "world": len(members), "members": members}
                kv.put(_key(kind, name, "ticket", o), json.dumps(ticket))
            plan = json.dumps(members).encode()
    plan = comm.allgather_bytes(plan)[0]
    if not plan:
        return comm
    members = json.loads(plan)
    grown = comm.grow(len(members), uid, rank=members.index(m.orig_rank), join_timeout=join_timeout)
    m.members = members
    comm.close()
    if grown.rank == 0:
        _update_members(kind, name, members)
    return grown


def members_of(kind, name):
    """Original ranks of the group's members, by current rank (this actor's view)."""
    return list(_member(kind, name).members)
