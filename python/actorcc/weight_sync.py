"""Weight sync from a trainer to rollout actors over one elastic actorcc group: bucketed
broadcasts, per-tensor digests, and membership that survives a rollout actor's death and takes a
restarted one back. The core under the RL framework adapters (actorcc.rl_engines: vLLM, verl,
NeMo-RL); usable by itself in any Ray job.

    # driver: the trainer is rank 0, the rollout actors the others (any order of arrival)
    actorcc.weight_sync.create_group(trainer, rollouts, name="weights")
    # each sync, concurrently (the driver or the framework fires both sides):
    #   in the trainer:   actorcc.weight_sync.Sender("weights").send(model.named_parameters())
    #   in each rollout:  for batch in actorcc.weight_sync.Receiver("weights").receive_buckets(): load(batch)
    # a restarted rollout actor, in its constructor:
    #   actorcc.weight_sync.rejoin("weights")      # its next sync brings it the current weights

One sync, on every member: grow the group (takes back restarted actors that asked to rejoin), the
trainer's plan (every tensor's name, shape, dtype, place, digest) to all, then one broadcast per
bucket (tensors packed as bytes, `bucket_bytes` each, a larger tensor alone), then an agreement
that every member has everything. A member that dies in any of these fails the call on every other
member within milliseconds naming it (actorcc's group error); the survivors shrink the group
without it, agree on the first step someone still lacks, and go on from there: the trainer sends
the buckets again from that one, the others re-receive only what they lack (nothing is given to
the caller twice). The trainer's death ends the sync on every rollout actor with an error naming
it. Every wait is bounded by the group's timeout (create_group's `timeout`).

Bytes move as they are (any dtype, bfloat16 included), so weights arrive bit for bit; with
verify=True each receiver also checks every tensor's BLAKE2b digest against the trainer's.
"""
from __future__ import annotations

import hashlib
import json
import time

from ._actorcc import InvalidArgumentError, RemoteError
from ._actorcc import TimeoutError as _ActorccTimeout

__all__ = ["create_group", "rejoin", "Sender", "Receiver", "DEFAULT_BUCKET_BYTES", "TrainerLostError"]

DEFAULT_BUCKET_BYTES = 256 << 20
_ALIGN = 64  # each tensor's place in a bucket: views of any dtype need aligned offsets
_GROW, _PLAN = -2, -1  # the steps before the buckets


class TrainerLostError(RemoteError):
    """The trainer (the group's original rank 0) died or left during a sync: nothing to go on with."""


def create_group(trainer, rollouts, name="weights", *, timeout=60.0, join_timeout=120.0, backend="auto", **options):
    """From the driver: forms the weight-sync group, the trainer at rank 0 (actorcc.ray.create_group).
    Rollout actors may still be starting: they join as they arrive, within join_timeout."""
    from . import ray as _ray
    return _ray.create_group([trainer] + list(rollouts), name=name, timeout=timeout, join_timeout=join_timeout,
                             backend=backend, **options)


def rejoin(name="weights", join_timeout=None):
    """In a rollout actor's constructor: after Ray restarted it, asks to come back into group `name`
    at its original rank; the members' next sync takes it back and brings it every tensor. False on
    the actor's first start."""
    from . import ray as _ray
    return _ray.rejoin_group(name, join_timeout=join_timeout)


def _torch():
    import torch
    return torch


def _byte_view(t):
    return t.detach().contiguous().reshape(-1).view(_torch().uint8)


def _digest(byte_view):
    return hashlib.blake2b(byte_view.cpu().numpy(), digest_size=16).hexdigest()


def _plan_of(named, bucket_bytes, verify):
    """[(name, shape, dtype, offset, nbytes, bucket, digest)] and the buckets' sizes."""
    entries, sizes, size = [], [], 0
    for name, t in named:
        n = t.numel() * t.element_size()
        if size and size + n > bucket_bytes:
            sizes.append(size)
            size = 0
        entries.append([name, list(t.shape), str(t.dtype).rsplit(".", 1)[-1], size, n, len(sizes),
                        _digest(_byte_view(t)) if verify else ""])
        size += -(-n // _ALIGN) * _ALIGN
    if size or not sizes:
        sizes.append(size)
    return entries, sizes


class _Member:
    """What Sender and Receiver share: the steps of a sync and their recovery."""

    def __init__(self, name, bucket_bytes=DEFAULT_BUCKET_BYTES, verify=False):
        if bucket_bytes < 1:
            raise InvalidArgumentError(f"weight sync: bucket_bytes must be positive, got {bucket_bytes}")
        self.name, self.bucket_bytes, self.verify = name, int(bucket_bytes), bool(verify)
        self.report = None

    def _run(self, step):
        """A generator running the sync's steps (step(comm, k) for k = _GROW, _PLAN, 0, 1, ...
        until it returns None; whatever else it returns is yielded, at once), then the final
        agreement; recovers from members' deaths as the module says. Its return value (the
        StopIteration's) is the report."""
        from . import ray as _ray
        t0 = time.monotonic()
        rep = {"lost": [], "recovered_s": [], "resumed_at": []}
        k = _GROW
        agree = False
        while True:
            comm = None
            try:
                comm = _ray.get_group(self.name)
                if agree:
                    k = min(int(b) for b in comm.allgather_bytes(str(k).encode()))
                    rep["resumed_at"].append(k)
                    agree = False
                while True:
                    if k == _GROW:
                        comm = _ray.grow_group(self.name)
                    else:
                        got = step(comm, k)
                        if got is None:
                            break
                        if got is not True:
                            yield got
                    k += 1
                comm.allgather_bytes(b"")  # nobody leaves while another member still recovers
                break
            except (RemoteError, _ActorccTimeout) as e:
                failed = time.monotonic()
                members = _ray.group_members(self.name)
                me = comm.rank if comm is not None else -1
                gone = sorted({members[r] for r in {getattr(e, "culprit", -1), *getattr(e, "culprits", ())}
                               if 0 <= r < len(members) and r != me})
                if 0 in gone:
                    err = TrainerLostError(f"actorcc weight sync {self.name!r}: the trainer (rank 0) was lost: {e}")
                    err.rank = err.culprit = 0
                    raise err from e
                _ray.shrink_group(self.name)
                rep["lost"] += gone
                rep["recovered_s"].append(time.monotonic() - failed)
                agree = True
        comm = _ray.get_group(self.name)
        rep.update(seconds=time.monotonic() - t0, world_size=comm.world_size, rank=comm.rank,
                   members=_ray.group_members(self.name))
        return rep


def _drain(gen):
    """Runs a generator to its end; returns its return value."""
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


class Sender(_Member):
    """The trainer's side (rank 0 of the group)."""

    def send(self, named_tensors):
        """Sends every (name, tensor) of `named_tensors` (a dict or pairs, torch tensors on one
        device) to every rollout actor of the group; returns a report: seconds, bytes, buckets,
        lost (original ranks of the rollout actors lost during it), world_size after it."""
        named = list(named_tensors.items() if hasattr(named_tensors, "items") else named_tensors)
        entries, sizes = _plan_of(named, self.bucket_bytes, self.verify)
        plan = json.dumps({"entries": entries, "sizes": sizes, "device": named[0][1].device.type if named else "cpu"})
        by_bucket = [[] for _ in sizes]
        for (_, t), e in zip(named, entries):
            by_bucket[e[5]].append((t, e))
        torch = _torch()

        def step(comm, k):
            if k == _PLAN:
                if comm.rank != 0:
                    raise InvalidArgumentError(f"weight sync {self.name!r}: the Sender must be rank 0, is {comm.rank}")
                comm.allgather_bytes(plan.encode())
                return True
            if k >= len(sizes):
                return None
            items = by_bucket[k]
            if len(items) == 1 and items[0][1][4] == sizes[k]:
                buf = _byte_view(items[0][0])  # one tensor: sent in place
            else:
                buf = torch.zeros(sizes[k], dtype=torch.uint8, device=items[0][0].device if items else "cpu")
                for t, e in items:
                    buf[e[3]:e[3] + e[4]] = _byte_view(t)
            if sizes[k]:
                comm.broadcast(buf, root=0)
            return True

        self.report = _drain(self._run(step))
        self.report.update(bytes=sum(e[4] for e in entries), buckets=len(sizes), tensors=len(entries))
        return self.report


class Receiver(_Member):
    """A rollout actor's side."""

    def __init__(self, name, device=None, **kw):
        super().__init__(name, **kw)
        self.device = device

    def receive_buckets(self):
        """Yields each bucket's tensors as a list of (name, tensor), in the trainer's order, as
        soon as the bucket has arrived, each once (a bucket received again after a member's death
        is not yielded again). The tensors are views of the bucket's buffer, on `device`
        (default: the trainer's device type). The trainer's next bucket waits for this receiver's
        next step, so what the caller does with a bucket counts against the group's timeout."""
        state = {"plan": None, "given": 0}
        torch = _torch()

        def step(comm, k):
            if k == _PLAN:
                state["plan"] = json.loads(comm.allgather_bytes(b"")[0])
                return True
            plan = state["plan"]
            if k >= len(plan["sizes"]):
                return None
            device = self.device or plan["device"]
            if device == "cuda":
                device = f"cuda:{torch.cuda.current_device()}"
            buf = torch.empty(plan["sizes"][k], dtype=torch.uint8, device=device)
            if plan["sizes"][k]:
                comm.broadcast(buf, root=0)
            if k < state["given"]:
                return True  # re-received after a recovery: the caller has it
            state["given"] = k + 1
            return self._unpack(buf, [e for e in plan["entries"] if e[5] == k]) or True

        self.report = yield from self._run(step)
        self.report.update(bytes=sum(e[4] for e in state["plan"]["entries"]), buckets=len(state["plan"]["sizes"]),
                           tensors=len(state["plan"]["entries"]))

    def receive(self):
        """Receives one sync; returns {name: tensor}."""
        return {n: t for batch in self.receive_buckets() for n, t in batch}

    def _unpack(self, buf, entries):
        torch = _torch()
        batch = []
        for name, shape, dtype, off, n, _, digest in entries:
            view = buf[off:off + n]
            if self.verify and digest and _digest(view) != digest:
                raise InvalidArgumentError(f"weight sync {self.name!r}: tensor {name!r} arrived with another digest "
                                           f"than the trainer's ({_digest(view)} != {digest})")
            batch.append((name, view.view(getattr(torch, dtype)).reshape(shape)))
        return batch
