"""Workers of verl's weight update (test_rl_verl.py): what verl's actor workers and
CheckpointEngineWorker do with the checkpoint engine (verl 0.9.1: the engine made by
CheckpointEngineRegistry.new(backend, [is_master=,] bucket_size=, **engine_kwargs), its methods run
by execute_checkpoint_engine, send_weights fed by the model's per-tensor generator,
receive_weights consumed by the server adapter's update_weights)."""
import os
import signal

import verl_mirror

base = verl_mirror.install()
import actorcc.rl.verl  # noqa: E402,F401 - what checkpoint_engine.custom_backend_module=actorcc.rl.verl does
from rl_actors import describe, make  # noqa: E402


class VerlWorker:
    def __init__(self, role, bucket_size, is_master=False, spec=None, seed=0, die_at_bucket=None):
        kwargs = {"comm_backend": "cpu", "timeout": 30, "join_timeout": 60}  # engine_kwargs.actorcc
        if role == "actor":
            kwargs["is_master"] = is_master
        self.engine = base.CheckpointEngineRegistry.new("actorcc", bucket_size=bucket_size, **kwargs)
        self.model = make(spec, seed) if spec else {}
        self.die_at = die_at_bucket
        self.role = role
        self.bucket_size = bucket_size

    def execute_checkpoint_engine(self, method, *args, **kwargs):
        return getattr(self.engine, method)(*args, **kwargs)

    async def update_weights(self, global_steps=None):  # async, as CheckpointEngineWorker.update_weights
        if self.role == "actor":  # every actor worker drives its generator; rank 0 sends
            return await self.engine.send_weights(((n, t) for n, t in self.model.items()), global_steps=global_steps)
        got, size = {}, 0
        async for name, tensor in self.engine.receive_weights(global_steps=global_steps):
            got[name] = tensor.clone()
            size += tensor.numel() * tensor.element_size()
            if self.die_at is not None and size > self.die_at * self.bucket_size:
                os.kill(os.getpid(), signal.SIGKILL)  # mid-update: more buckets on their way
        self.received = got
        return {}

    def described(self):
        return describe(getattr(self, "received", None) or self.model)
