"""shrink_group: the "actorcc" backend's answer to torch.distributed.shrink_group, which needs
a C++ Backend and cannot reach this Python process group (docs/torch.md)."""
from __future__ import annotations

import torch.distributed as dist

from .process_group import ActorccProcessGroup

__all__ = ["shrink_group"]


def shrink_group(group, exclude, join_timeout=None):
    """The "actorcc" backend's answer to torch.distributed.shrink_group, which cannot reach a
    Python process group (docs/torch.md): a new ActorccProcessGroup of `group`'s ranks except
    `exclude` (ranks of `group`), renumbered in order, whose communicators are the old ones shrunk
    (Communicator.shrink: it works after a rank died, and never waits for an excluded one). Every
    survivor calls it with the same list. The new group is used through its methods
    (`new.allreduce([t]).wait()`); torch's group registry does not know it. A device kind the old
    group never used gets its communicator through the old group's store, which must still be
    alive then (with torch's TCPStore: the process of the old rank 0)."""
    ex = sorted({int(r) for r in exclude})
    survivors = [r for r in range(group.size()) if r not in ex]
    if group.rank() not in survivors:
        raise ValueError(f"actorcc shrink_group: rank {group.rank()} is in the exclude list {ex}")
    store = dist.PrefixStore(f"actorcc_shrunk/{','.join(map(str, ex))}/", group._store)
    new = ActorccProcessGroup(store, survivors.index(group.rank()), len(survivors), group._timeout)
    with group._lock:
        for kind in sorted(group._comms):  # the same order on every survivor
            new._comms[kind] = group._comms[kind].shrink(ex, join_timeout)
    return new
