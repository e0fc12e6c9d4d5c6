"""The weight-sync group of a framework adapter whose framework hands out ranks itself (verl,
NeMo-RL): the group's UniqueId made by the sender's process when the framework asks for its
metadata, the ranks the framework's topology gives, and the group registered under a name in
actorcc.ray, so that actorcc.weight_sync's elastic steps (shrink, grow) work on it."""
from __future__ import annotations

from .._actorcc import UniqueId
from ..ray import groups as _groups
from ..ray import uid_store as _store


def new_uid():
    """A UniqueId whose root lives in this (the sender's) process, on Ray's address for this node."""
    return str(UniqueId.create(_groups._node_ip()))


def join(name, uid, rank, world_size, **options):
    """Joins the group `name` (leaving an earlier group of that name first: frameworks form one per
    topology). Blocks until every rank has joined (bounded by join_timeout)."""
    leave(name)
    _groups._join(None, name, uid, rank, world_size, options)


def leave(name):
    _groups._leave(None, name)



def publish_uid(key):
    """A UniqueId made here and published under `key` in Ray's KV store (for frameworks whose
    metadata step runs before a worker knows its rank, so no id can travel in it)."""
    return _store.publish(key, _groups._node_ip())


def wait_uid(key, timeout, what):
    return _store.wait(key, timeout, what)


def drop_uid(key):
    _store.drop(key)
