"""NeMo-RL's refit interface (main of 2026-12: nemo_rl/utils/checkpoint_engines/base.py, the abstract
CheckpointEngine and create_checkpoint_engine, which loads a "module:Class" backend), mirrored for
the tests: NeMo-RL is not on PyPI in a usable version (nemo-rl 0.0.0) and needs Megatron and vLLM.
install() puts it in sys.modules under its name unless the real NeMo-RL imports."""
import importlib
import sys
import types
from abc import ABC, abstractmethod

VERSION = "main 2026-12"


class CheckpointEngine(ABC):
    cleanup_after_load = True

    @abstractmethod
    def prepare(self): ...

    @abstractmethod
    def init_policy_process_group(self, *, worker_rank, train_world_size, rollout_world_size, metadata): ...

    @abstractmethod
    def init_rollout_process_group(self, *, rollout_rank, train_world_size, rollout_world_size, metadata): ...

    def finalize(self):
        pass

    @abstractmethod
    async def send_weights(self, weights): ...

    @abstractmethod
    def receive_weight_batches(self): ...


def create_checkpoint_engine(backend, *, bucket_size_bytes, engine_kwargs):
    module_name, class_name = backend.split(":", 1)
    return getattr(importlib.import_module(module_name), class_name)(bucket_size=bucket_size_bytes, **engine_kwargs)


def install():
    try:
        import nemo_rl.utils.checkpoint_engines.base as real
        return real
    except ImportError:
        pass
    names = ["nemo_rl", "nemo_rl.utils", "nemo_rl.utils.checkpoint_engines"]
    mods = {n: types.ModuleType(n) for n in names}
    for m in mods.values():
        m.__path__ = []
    base = types.ModuleType(names[-1] + ".base")
    base.CheckpointEngine, base.create_checkpoint_engine, base.MIRRORS = CheckpointEngine, create_checkpoint_engine, VERSION
    mods[base.__name__] = base
    sys.modules.update(mods)
    return base
