"""The weight-sync group of a framework adapter whose framework hands out ranks itself (verl,
NeMo-RL): the group's UniqueId made by the sender's process when the framework asks for its
metadata, the ranks the framework's topology gives, and the group registered under a name in
actorcc.ray, so that actorcc.weight_sync's elastic steps (shrink, grow) work on it."""
from __future__ import annotations

import time

from .. import _ray_elastic as _E
from .. import ray as _ray
from .._actorcc import UniqueId


def new_uid():
    """A UniqueId whose root lives in this (the sender's) process, on Ray's address for this node."""
    return str(UniqueId.create(_ray._node_ip()))


def join(name, uid, rank, world_size, **options):
    """Joins the group `name` (leaving an earlier group of that name first: frameworks form one per
    topology). Blocks until every rank has joined (bounded by join_timeout)."""
    leave(name)
    _ray._join(None, name, uid, rank, world_size, options)


def leave(name):
    _ray._leave(None, name)


def publish_uid(key):
    """Makes a UniqueId here and publishes it in Ray's KV store under `key` (for frameworks whose
    metadata step runs before a worker knows its rank, so no id can travel in it)."""
    uid = new_uid()
    _E._kv().put(_uid_key(key), uid)
    return uid


def wait_uid(key, timeout, what):
    """The UniqueId published under `key`, waiting up to `timeout` seconds for it."""
    deadline = time.monotonic() + timeout
    kv = _E._kv()
    while True:
        uid = kv.get(_uid_key(key))
        if uid is not None:
            return uid
        if time.monotonic() > deadline:
            raise _E.timeout_error(f"{what}: the sender did not publish the group's id within {timeout:g}s", 0)
        time.sleep(0.01)


def drop_uid(key):
    _E._kv().delete(_uid_key(key))


def _uid_key(key):
    return f"rl_uid:{key}"
