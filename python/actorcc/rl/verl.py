"""verl's checkpoint engine "actorcc" (verl 0.9.1, verl/checkpoint_engine/base.py): weights from
the actor worker group's rank 0 to every rollout worker through actorcc.weight_sync.

    actor_rollout_ref.rollout.checkpoint_engine.backend=actorcc
    actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=actorcc.rl.verl

(or the `verl.plugins` entry point, which actorcc's package declares). verl's
CheckpointEngineManager then, for each update: prepare() on every worker (the actor's rank 0 makes
the group's UniqueId), build_topology() (actor rank 0 is the sender, rank 0 of the group; the other
actor workers sit out; rollout workers are ranks 1..N), init_process_group() on every worker (the
group forms), send_weights() / receive_weights(), finalize() (the group is left).

A rollout worker that dies during an update: the sender and the other rollout workers finish that
update (the group shrinks without it); verl's manager sees the dead worker's own call fail. The
next update's topology is built from the workers verl has then, a restarted one included, which
gets every weight in it.
"""
from __future__ import annotations

import asyncio
import inspect

from .. import weight_sync as _ws
from . import _group

try:  # verl installed: subclass its base class and register in its registry
    from verl.checkpoint_engine.base import CheckpointEngine as _Base
    from verl.checkpoint_engine.base import CheckpointEngineRegistry as _Registry
except ImportError:  # without verl the class still works (tests, other callers)
    _Base, _Registry = object, None

BACKEND = "actorcc"
GROUP = "verl_weights"


async def _each(weights):
    """(name, tensor) of a generator or an async generator, as verl hands out either."""
    if inspect.isasyncgen(weights) or hasattr(weights, "__aiter__"):
        async for item in weights:
            yield item
    else:
        for item in weights:
            yield item


class ActorccCheckpointEngine(_Base):
    """bucket_size: bytes per broadcast (verl's update_weights_bucket_megabytes). is_master: the
    actor worker group's rank 0 (verl passes it on the actor side). Other keywords
    (checkpoint_engine.engine_kwargs.actorcc): timeout, join_timeout (seconds), verify (digest
    check of every tensor), comm_backend (actorcc's "auto", "cpu", "cuda"; not "backend", which
    is verl's registry name)."""

    def __init__(self, bucket_size, is_master=False, timeout=60.0, join_timeout=120.0, verify=False,
                 comm_backend="auto", **_):
        self.bucket_size = int(bucket_size)
        self.is_master = bool(is_master)
        self.options = {"timeout": timeout, "join_timeout": join_timeout, "backend": comm_backend}
        self.verify = verify
        self.rank = None
        self.report = None

    def prepare(self):
        return {"uid": _group.new_uid() if self.is_master else None}

    @classmethod
    def build_topology(cls, actor_wg_world_size, rollout_world_size, metadata):
        uid = metadata[0]["uid"]
        if uid is None:
            raise ValueError("actorcc checkpoint engine: the actor worker group's rank 0 must be the master "
                             "(is_master=True)")
        world = 1 + rollout_world_size
        actor = {"rank": [0] + [-1] * (actor_wg_world_size - 1), "world_size": [world] * actor_wg_world_size,
                 "uid": [uid] * actor_wg_world_size}
        rollout = {"rank": list(range(1, world)), "world_size": [world] * rollout_world_size,
                   "uid": [uid] * rollout_world_size}
        return actor, rollout

    def init_process_group(self, rank, world_size, uid, **_):
        self.rank = rank
        if rank >= 0:
            _group.join(GROUP, uid, rank, world_size, **self.options)

    def finalize(self):
        if self.rank is not None and self.rank >= 0:
            _group.leave(GROUP)
        self.rank = None

    async def send_weights(self, weights, global_steps=None):
        named = [item async for item in _each(weights)]  # the other actor workers drive the generator too
        if self.rank != 0:
            return {}
        sender = _ws.Sender(GROUP, bucket_bytes=self.bucket_size, verify=self.verify)
        self.report = await asyncio.get_running_loop().run_in_executor(None, sender.send, named)
        return {"actorcc/sync_s": self.report["seconds"], "actorcc/bytes": self.report["bytes"],
                "actorcc/lost_rollout_ranks": list(self.report["lost"])}

    async def receive_weights(self, global_steps=None):
        receiver = _ws.Receiver(GROUP, bucket_bytes=self.bucket_size, verify=self.verify)
        for batch in receiver.receive_buckets():
            for name, tensor in batch:
                yield name, tensor
        self.report = receiver.report


if _Registry is not None:
    _Registry.register(BACKEND)(ActorccCheckpointEngine)
