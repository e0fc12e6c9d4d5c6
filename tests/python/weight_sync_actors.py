"""Actors for test_rl_weight_sync.py: a trainer that sends its model with actorcc.weight_sync,
and rollout actors that receive it; a rollout can be told to die (SIGKILL) after receiving a
given bucket of its first life's syncs, and rejoins when Ray restarts it."""
import os
import signal

import ray
import torch

import actorcc.weight_sync as ws
from rl_actors import describe, make

GROUP = "weights"


class SyncTrainer:
    def __init__(self, spec, seed):
        self.model = make(spec, seed)

    def train_step(self, step):
        g = torch.Generator().manual_seed(1000 + step)
        for t in self.model.values():  # every tensor changes
            if t.is_floating_point():
                t.add_(torch.randn(t.shape, generator=g).to(t.dtype))
            else:
                t.add_(1)
        return step

    def sync(self, bucket_bytes, verify=True):
        return ws.Sender(GROUP, bucket_bytes=bucket_bytes, verify=verify).send(self.model)

    def described(self):
        return describe(self.model)


class SyncRollout:
    def __init__(self, die_at_bucket=None):
        self.restarted = ray.get_runtime_context().was_current_actor_reconstructed
        self.die_at = None if self.restarted else die_at_bucket  # dies once; its restart lives
        self.rejoining = ws.rejoin(GROUP)
        self.model = {}
        self.served = 0

    def state(self):
        return {"pid": os.getpid(), "restarted": self.restarted, "rejoining": self.rejoining}

    def sync(self, bucket_bytes, verify=True):
        r = ws.Receiver(GROUP, bucket_bytes=bucket_bytes, verify=verify)
        for i, batch in enumerate(r.receive_buckets()):
            if i == self.die_at:
                os.kill(os.getpid(), signal.SIGKILL)  # mid-sync: the next buckets are on their way
            self.model.update(batch)
        return r.report

    def serve(self):
        """What serving needs: the weights; a rollout without them must not answer."""
        assert self.model, "no weights yet"
        self.served += 1
        return self.served

    def described(self):
        return describe(self.model)
