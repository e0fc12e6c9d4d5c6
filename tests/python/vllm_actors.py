"""A vLLM worker's side of weight transfer and the trainer's (test_rl_vllm.py), as vLLM 0.33 runs
them: the worker's engine made by WeightTransferEngineFactory.create_engine(config, vllm_config,
device, model) after the general plugins loaded (actorcc.rl.vllm_plugin:register), the trainer's by
WeightTransferTrainerFactory.trainer_init(...) with a VLLMWeightSyncClient that forwards to the
workers (as the Ray actors' client does)."""
import os
import signal
import types

import ray
import torch

import vllm_mirror

base, factory = vllm_mirror.install()
import actorcc.rl.vllm_plugin  # noqa: E402

actorcc.rl.vllm_plugin.register()  # what vLLM's load_general_plugins() does in each of its processes
from rl_actors import describe, make  # noqa: E402


class Model:
    """The part of a vLLM model weight transfer uses: load_weights(weights=[(name, tensor)])."""

    def __init__(self, die_after=None):
        self.weights, self.batches, self.die_after = {}, 0, die_after

    def load_weights(self, weights):
        for name, t in weights:
            self.weights[name] = t.clone()
        self.batches += 1
        if self.die_after is not None and self.batches > self.die_after:
            os.kill(os.getpid(), signal.SIGKILL)  # mid-sync: more buckets on their way


class VllmWorker:
    def __init__(self, worker_rank, die_after_batches=None):
        self.model = Model(die_after_batches)
        vllm_config = types.SimpleNamespace(parallel_config=types.SimpleNamespace(rank=worker_rank), model_config=None)
        config = types.SimpleNamespace(backend="actorcc")
        self.engine = factory.WeightTransferEngineFactory.create_engine(config, vllm_config, torch.device("cpu"),
                                                                        self.model)

    def init_weight_transfer_engine(self, init_info):
        self.engine.init_transfer_engine(self.engine.parse_init_info(init_info))

    def start_weight_update(self):
        self.engine.start_weight_update()

    def update_weights(self, update_info):
        self.engine.update_weights(update_info)

    def finish_weight_update(self):
        self.engine.finish_weight_update()

    def described(self):
        return describe(self.model.weights)


class Client:
    """VLLMWeightSyncClient over the workers' actor handles: each call runs on every worker."""

    def __init__(self, workers):
        self.workers = workers

    def _all(self, method, *args):
        return ray.get([getattr(w, method).remote(*args) for w in self.workers], timeout=120)

    def init_weight_transfer_engine(self, init_info):
        self._all("init_weight_transfer_engine", init_info)

    def start_weight_update(self):
        self._all("start_weight_update")

    def update_weights(self, update_info):
        self._all("update_weights", update_info)

    def finish_weight_update(self):
        self._all("finish_weight_update")


class Trainer:
    def __init__(self, spec, seed, workers, bucket_bytes):
        from actorcc.rl.vllm import ActorccTrainerInitInfo
        self.model = make(spec, seed)
        self.client = Client(workers)
        info = ActorccTrainerInitInfo(rank=0, world_size=1 + len(workers), bucket_bytes=bucket_bytes,
                                      comm_backend="cpu", timeout=30, join_timeout=120, verify=True)
        self.engine = factory.WeightTransferTrainerFactory.trainer_init(
            "actorcc", None, info, client=self.client, source=self.model.items())

    def set_workers(self, workers):
        self.client.workers = workers

    def send_weights(self):
        self.engine.source = list(self.model.items())
        return self.engine.send_weights()

    def described(self):
        return describe(self.model)
