"""NeMo-RL's refit transport on actorcc (NeMo-RL main of 2026-12, nemo_rl/utils/checkpoint_engines/
base.py: CheckpointEngine made by create_checkpoint_engine(backend, bucket_size_bytes=,
engine_kwargs=) from a "module:Class" backend name):

    policy.generation.refit_transport: "actorcc.rl.nemo_rl:ActorccCheckpointEngine"

Each refit: prepare() on every policy and rollout worker, then init_policy_process_group /
init_rollout_process_group with every worker's metadata, send_weights on the policy workers (the
policy's worker 0 sends, the others drive their generator and sit out), receive_weight_batches on
the rollout workers, finalize. The group: the policy's worker 0 at rank 0, rollout worker r at
rank 1 + r. prepare() runs before a worker knows its rank, so the group's id cannot travel in the
metadata: worker 0 publishes it in Ray's KV store under the key metadata[0] names, and the rollout
workers read it there.

A rollout worker that dies during a refit: the policy and the other rollout workers finish it (the
group shrinks). The next refit is formed from the workers NeMo-RL has then.
"""
from __future__ import annotations

import asyncio
import inspect
import secrets

from .. import weight_sync as _ws
from . import _group

try:
    from nemo_rl.utils.checkpoint_engines.base import CheckpointEngine as _Base
except ImportError:  # without NeMo-RL the class still works (tests, other callers)
    _Base = object

GROUP = "nemo_rl_weights"


class ActorccCheckpointEngine(_Base):
    """bucket_size: bytes per broadcast. engine_kwargs: timeout, join_timeout (seconds), verify
    (digest check of every tensor), comm_backend (actorcc's "auto", "cpu", "cuda")."""

    def __init__(self, bucket_size, timeout=60.0, join_timeout=120.0, verify=False, comm_backend="auto", **_):
        self.bucket_size = int(bucket_size)
        self.options = {"timeout": timeout, "join_timeout": join_timeout, "backend": comm_backend}
        self.verify = verify
        self.rank = None
        self.key = None
        self.report = None

    def prepare(self):
        return {"token": secrets.token_hex(8)}

    def _join(self, rank, world_size, metadata):
        self.key = metadata[0]["token"]
        if rank == 0:
            uid = _group.publish_uid(self.key)
        else:
            uid = _group.wait_uid(self.key, self.options["join_timeout"], f"actorcc refit (rank {rank})")
        _group.join(GROUP, uid, rank, world_size, **self.options)
        self.rank = rank

    def init_policy_process_group(self, *, worker_rank, train_world_size, rollout_world_size, metadata):
        if worker_rank != 0:
            self.rank = -1  # sits out: one sender
            return
        self._join(0, 1 + rollout_world_size, metadata)

    def init_rollout_process_group(self, *, rollout_rank, train_world_size, rollout_world_size, metadata):
        self._join(1 + rollout_rank, 1 + rollout_world_size, metadata)

    def finalize(self):
        if self.rank == 0:
            _group.drop_uid(self.key)
        if self.rank is not None and self.rank >= 0:
            _group.leave(GROUP)
        self.rank = None

    async def send_weights(self, weights):
        if inspect.isasyncgen(weights):
            named = [item async for item in weights]
        else:
            named = list(weights)  # every policy worker drives the generator: gathering may be collective
        if self.rank != 0:
            return None
        sender = _ws.Sender(GROUP, bucket_bytes=self.bucket_size, verify=self.verify)
        self.report = await asyncio.get_running_loop().run_in_executor(None, sender.send, named)
        return None

    async def receive_weight_batches(self):
        receiver = _ws.Receiver(GROUP, bucket_bytes=self.bucket_size, verify=self.verify)
        for batch in receiver.receive_buckets():
            yield batch
        self.report = receiver.report
