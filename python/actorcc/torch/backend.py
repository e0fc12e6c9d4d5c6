"""The backend's registration with torch.distributed and the group creator torch calls: every
rank waits there for the others, through the group's store, before its group is made (a rank
that left early broke the others' gloo setup), and ranks that disagree on the world size all get
the same verdict naming the one(s) at fault; where the group's device is known at its creation,
its communicator is formed then."""
from __future__ import annotations

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

from .._actorcc import InvalidArgumentError
from .process_group import BACKEND_NAME, ActorccProcessGroup, _timeout_of

__all__ = ["BACKEND_NAME", "register"]


def _create_from(opts, backend_options=None):
    """The creator torch calls with its extended arguments (register()): those of _create, and
    the group torch made for this one, whose bound device (init_process_group's or new_group's
    device_id) tells which communicator to form at once."""
    torch_pg = getattr(opts, "process_group", None)
    pg = _create(opts.store, opts.group_rank, opts.group_size, opts.timeout, _eager_device(torch_pg))
    bound = getattr(torch_pg, "bound_device_id", None)
    if bound is not None:
        # torch bound the device to the group it made, which this one replaces: bound here too,
        # new_group inherits it (and forms its communicator at once) as with NCCL's groups
        pg.bound_device_id = bound
    return pg


def _eager_device(torch_pg):
    """The device whose communicator a new group forms at its creation, as torch's NCCL backend
    does given a device_id, so that the group's first call costs what the others do (forming a
    communicator costs a join of every rank: at 16 ranks on CPU the first call took 233-425 ms
    against gloo's 55-95). `torch_pg` is the group torch made before asking this backend for its
    own (None in a torch that does not pass it: then nothing is known). The device is known
    where torch bound one (device_id: a CUDA device, or the CPU), or where this process has no
    CUDA (only CPU tensors can come); the CPU side only where no other backend serves it (with
    "cpu:gloo,cuda:actorcc" torch has made gloo for it before asking this one). None: each
    communicator is formed on the first call with its device type's tensors."""
    if torch_pg is None:
        return None
    bound = getattr(torch_pg, "bound_device_id", None)
    if bound is not None and bound.type == "cuda":
        return bound
    if bound is not None and bound.type != "cpu" or bound is None and torch.cuda.is_available():
        return None  # CPU and CUDA tensors alike may come first
    try:
        torch_pg._get_backend(torch.device("cpu"))
        return None  # another backend serves CPU tensors
    except RuntimeError:  # torch: "No backend type associated with device type cpu"
        return torch.device("cpu")


def _create(store, rank, size, timeout, device=None):
    # With "cpu:gloo,cuda:actorcc" torch has just built a gloo backend for the group, which it
    # drops once this returns; a rank that dropped it while another was still connecting broke
    # the other's gloo setup (torch 2.5: "connectFullMesh failed ... closed by peer"). So every
    # rank leaves only once all have got here, through the group's store. Each rank leaves its
    # world size under its own key and counts itself under its size too, so a rank that waits can
    # say who is missing (every few seconds, and in the error at the timeout), and every rank
    # sees at once that a rank of another size has arrived (the group count passes its own
    # size's): the mistake of one rank fails them all, naming it, not only itself.
    secs = _timeout_of(timeout)
    store.set(f"actorcc_created/{rank}", str(size))
    store.add(f"actorcc_created_as/{size}", 1)  # before the group count: see _sizes_differ
    store.add("actorcc_created", 1)
    t0 = time.monotonic()
    next_note = t0 + 5
    while True:
        arrived = int(store.add("actorcc_created", 0))
        if _sizes_differ(store, size, arrived):
            raise _world_mismatch(store, rank, size)
        if arrived >= size:
            break
        now = time.monotonic()
        if now > next_note or now - t0 > secs:
            keys = [f"actorcc_created/{r}" for r in range(size)]
            missing = [r for r, k in enumerate(keys) if not store.check([k])]
            if any(int(store.get(k)) != size for r, k in enumerate(keys) if r not in missing):
                raise _world_mismatch(store, rank, size)
            text = (f"rank(s) {', '.join(map(str, missing)) or '?'} of {size} have not created the group "
                    f"({size - len(missing)} have)")
            if now - t0 > secs:
                from .._actorcc import TimeoutError as _Timeout
                e = _Timeout(f"actorcc torch backend: rank {rank}: {text} within the group's timeout of {secs:g} s")
                e.rank = e.observer_rank = rank
                e.culprit = missing[0] if missing else -1
                raise e
            # the library's log line (common/log.cpp): UTC time of day to the microsecond
            stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S.%f")
            print(f"[actorcc WARN pid {os.getpid()} {stamp}] actorcc torch backend: rank {rank}: still waiting: {text}",
                  file=sys.stderr, flush=True)
            next_note = now + 10
        time.sleep(0.005)
    pg = ActorccProcessGroup(store, rank, size, timeout)
    if device is not None:  # the group's device is known: its communicator is formed now
        pg._make_comm(device.type, device.index if device.type == "cuda" else "cpu")
    return pg


def _sizes_differ(store, size, arrived):
    """Whether a rank of another world size is among the `arrived` ones: each rank counts itself
    under its size before the group count, so every counted rank of this size is counted there."""
    return arrived > int(store.add(f"actorcc_created_as/{size}", 0))


def _world_mismatch(store, rank, size):
    """The InvalidArgumentError of ranks that disagree on the world size, the same verdict on every
    rank: the culprits are the ranks whose size differs from the most ranks' (on a tie, from this
    rank's). The smallest size given is as many ranks as surely exist, so their sizes are awaited
    (briefly) before the verdict: the rank at fault may be the first to see the disagreement."""
    sizes = {rank: size}
    give_up = time.monotonic() + 2
    try:
        while True:
            want = min(sizes.values())
            for r in range(want):
                k = f"actorcc_created/{r}"
                if r not in sizes and store.check([k]):
                    sizes[r] = int(store.get(k))
            if all(r in sizes for r in range(min(sizes.values()))) or time.monotonic() > give_up:
                break
            time.sleep(0.005)
    except Exception:  # noqa: BLE001 - the store's host may be gone already: judge by what was read
        pass
    counts = {}
    for n in sizes.values():
        counts[n] = counts.get(n, 0) + 1
    common = max(counts, key=lambda n: (counts[n], n == size))
    culprits = sorted(r for r, n in sizes.items() if n != common)
    e = InvalidArgumentError(
        f"actorcc torch backend: rank {rank}: the ranks disagree on the world size: this rank has {size}, "
        + ", ".join(f"rank {r} has {n}" for r, n in sorted(sizes.items()) if r != rank and n != size)
        + f"; the most ranks have {common}, so the one(s) at fault: {', '.join(map(str, culprits))}")
    e.rank = e.observer_rank = rank
    e.culprit = culprits[0] if culprits else -1
    _wait_for_verdicts(store, rank)
    return e


def _wait_for_verdicts(store, rank):
    """Each rank counts its verdict; rank 0 waits (briefly) for those of every rank that has
    arrived before it raises: a store that rank 0's process hosts ends with the failed init, and
    a rank still reading the others' sizes would then get torch's network error instead."""
    try:
        store.add("actorcc_created_verdicts", 1)
        give_up = time.monotonic() + 2
        while rank == 0 and time.monotonic() < give_up:
            if int(store.add("actorcc_created_verdicts", 0)) >= int(store.add("actorcc_created", 0)):
                return
            time.sleep(0.005)
    except Exception:  # noqa: BLE001 - best effort: the verdict stands either way
        pass


def register():
    """Registers the backend with torch.distributed (devices cpu and cuda). Idempotent: a worker
    that imports actorcc.torch again (or two packages that both register it) is fine."""
    if BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}) or hasattr(dist.Backend, BACKEND_NAME.upper()):
        return BACKEND_NAME
    try:  # the extended arguments carry the group's device (_create_from)
        dist.Backend.register_backend(BACKEND_NAME, _create_from, extended_api=True, devices=["cpu", "cuda"])
    except TypeError:  # torch without the devices= keyword
        dist.Backend.register_backend(BACKEND_NAME, _create_from, extended_api=True)
    return BACKEND_NAME
