"""The weight-sync calls of OpenRLHF 0.11.2 with vllm.sync_with_ray (mirrored: OpenRLHF needs
deepspeed and vLLM, which do not install on CI's CPU machines), for test_rl_openrlhf.py.

What OpenRLHF does, and these classes do with the same ray.util.collective calls:
  - the trainer (its rank 0 actor) fires init_process_group(master_address, master_port,
    rank_offset, world_size, group_name, backend=vllm.sync_backend, use_ray=True) on every vLLM
    engine (rank_offset = 1 + engine index * tensor-parallel size), then joins itself as rank 0
    with collective.init_collective_group(world_size=, rank=0, backend=, group_name=);
  - each vLLM worker (WorkerWrap.init_process_group) joins with
    collective.init_collective_group(world_size=, rank=rank_offset + its tp rank, backend=, group_name=);
  - per parameter, the trainer fires engine.update_weight.remote(name, dtype=, shape=,
    empty_cache=) on every engine, then collective.broadcast(param.data, 0, group_name=) and
    ray.get of those refs; the worker's update_weight allocates torch.empty(shape, dtype) and
    receives it with collective.broadcast(weight, 0, group_name=), then loads it.
What actorcc adds: vllm.sync_backend = "actorcc", and the job's runtime_env
{"worker_process_setup_hook": "actorcc.ray.register_backend"}, which registers the backend in
every Ray worker process (trainer and vLLM workers alike) before it runs anything: these classes
call nothing of actorcc's but the elastic shrink."""
import os
import signal
import time

import ray
import ray.util.collective as collective
import torch

import actorcc
import actorcc.ray
from rl_actors import describe, make


class VllmWorker:
    """What WorkerWrap (openrlhf/trainer/ray/vllm_worker_wrap.py) does for weight sync (tp = 1)."""

    def __init__(self, delay=0.0):
        time.sleep(delay)  # engines that start seconds apart
        self.weights = {}
        self.die_at = None

    def init_process_group(self, master_address, master_port, rank_offset, world_size, group_name, backend="nccl",
                           use_ray=False):
        assert use_ray
        collective.init_collective_group(world_size=world_size, rank=rank_offset, backend=backend,
                                         group_name=group_name)
        self._model_update_group = group_name
        return rank_offset

    def die_when_receiving(self, name):
        self.die_at = name

    def update_weight(self, name, dtype, shape, empty_cache=False):
        if name == self.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        weight = torch.empty(shape, dtype=dtype)
        try:
            collective.broadcast(weight, 0, group_name=self._model_update_group)
        except actorcc.Error as e:
            return ("error", name, e.culprit, str(e))
        self.weights[name] = weight  # load_weights
        return ("ok", name, None, None)

    def shrink(self):
        return actorcc.ray.shrink_collective_group(self._model_update_group).world_size

    def described(self):
        return describe(self.weights)


class Trainer:
    """What the PPO actor's rank 0 does (openrlhf/trainer/ray/ppo_actor.py: the model-update group
    and _broadcast_to_vllm with use_ray)."""

    def __init__(self, spec, seed):
        self.params = make(spec, seed)

    def init_group(self, engines, backend, group_name):
        world_size = len(engines) + 1
        refs = [e.init_process_group.remote("127.0.0.1", 0, i + 1, world_size, group_name, backend=backend,
                                            use_ray=True) for i, e in enumerate(engines)]
        collective.init_collective_group(world_size=world_size, rank=0, backend=backend, group_name=group_name)
        self._model_update_group = group_name
        return ray.get(refs)

    def broadcast_to_vllm(self, engines):
        """Returns (per-parameter outcome on the trainer, the engines' update_weight refs of the
        parameter whose broadcast failed (None when none did), seconds)."""
        t0 = time.monotonic()
        outcome = []
        names = list(self.params)
        for count, name in enumerate(names, 1):
            param = self.params[name]
            refs = [e.update_weight.remote(name, dtype=param.dtype, shape=param.shape, empty_cache=count == len(names))
                    for e in engines]
            try:
                collective.broadcast(param.data, 0, group_name=self._model_update_group)
            except actorcc.Error as e:
                outcome.append(("error", name, e.culprit, str(e), time.monotonic() - t0))
                return outcome, refs, time.monotonic() - t0
            ray.get(refs)
            outcome.append(("ok", name, None, None, time.monotonic() - t0))
        return outcome, None, time.monotonic() - t0

    def shrink(self):
        return actorcc.ray.shrink_collective_group(self._model_update_group).world_size

    def described(self):
        return describe(self.params)
