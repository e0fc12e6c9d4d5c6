"""Policy and rollout workers of a NeMo-RL refit (test_rl_nemo_rl.py): the engine made by
create_checkpoint_engine(refit_transport, bucket_size_bytes=, engine_kwargs=), its steps run as
NeMo-RL runs them."""
import os
import signal

import nemo_rl_mirror

base = nemo_rl_mirror.install()
from rl_actors import describe, make  # noqa: E402

TRANSPORT = "actorcc.rl.nemo_rl:ActorccCheckpointEngine"


class RefitWorker:
    def __init__(self, bucket_size, spec=None, seed=0, die_after_batches=None):
        self.engine = base.create_checkpoint_engine(TRANSPORT, bucket_size_bytes=bucket_size,
                                                    engine_kwargs={"comm_backend": "cpu", "timeout": 30})
        assert isinstance(self.engine, base.CheckpointEngine)
        self.model = make(spec, seed) if spec else {}
        self.die_after = die_after_batches

    def prepare(self):
        return self.engine.prepare()

    def init_policy(self, **kw):
        self.engine.init_policy_process_group(**kw)

    def init_rollout(self, **kw):
        self.engine.init_rollout_process_group(**kw)

    async def send(self):
        await self.engine.send_weights((n, t) for n, t in self.model.items())
        return self.engine.report

    async def receive(self):
        n = 0
        async for batch in self.engine.receive_weight_batches():
            self.model.update({k: v.clone() for k, v in batch})
            n += 1
            if self.die_after is not None and n > self.die_after:
                os.kill(os.getpid(), signal.SIGKILL)  # mid-refit
        return self.engine.report

    def finalize(self):
        self.engine.finalize()

    def described(self):
        return describe(self.model)
