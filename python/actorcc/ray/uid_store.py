"""UniqueIds handed over through Ray's KV store (namespace "actorcc", keys "uid:<key>"): for
groups whose ranks learn who they are only when they meet (the Ray tensor transport's pair groups,
frameworks whose metadata step runs before a worker knows its rank). The sender makes the id (its
root lives in the sender's process, so the group's life is the sender's) and publishes it; the
others wait for it, bounded."""
from __future__ import annotations

import time

from . import elastic as _E
from .._actorcc import UniqueId

_POLL_S = 0.01


def _key(key):
    return f"uid:{key}"


def publish(key, host=""):
    """Makes a UniqueId here (on `host`; '' lets actorcc pick) and publishes it under `key`."""
    uid = str(UniqueId.create(host))
    _E._kv().put(_key(key), uid)
    return uid


def wait(key, timeout, what, rank=0, take=False):
    """The UniqueId published under `key`, waiting up to `timeout` seconds (then an actorcc
    TimeoutError naming `what`, culprit `rank`: the sender). take=True removes it once read."""
    deadline = time.monotonic() + timeout
    kv = _E._kv()
    while True:
        uid = kv.get(_key(key))
        if uid is not None:
            if take:
                kv.delete(_key(key))
            return uid
        if time.monotonic() > deadline:
            raise _E.timeout_error(f"{what}: the sender did not publish the group's id within {timeout:g}s", rank)
        time.sleep(_POLL_S)


def drop(key):
    _E._kv().delete(_key(key))
