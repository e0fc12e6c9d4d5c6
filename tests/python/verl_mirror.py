"""verl 0.9.1's checkpoint-engine interface (verl/checkpoint_engine/base.py: CheckpointEngineRegistry
and the abstract CheckpointEngine), mirrored for the tests where verl is not installed: verl pulls
transformers, tensordict, vLLM/SGLang adapters and more, which CI's CPU machines do not get.
install() puts it in sys.modules as verl.checkpoint_engine.base unless the real verl imports."""
import sys
import types
from abc import ABC, abstractmethod

VERSION = "0.9.1"


class CheckpointEngineRegistry:
    _registry = {}

    def register(backend):
        def wrapper(cls):
            CheckpointEngineRegistry._registry[backend] = cls
            return cls
        return wrapper

    @classmethod
    def get(cls, backend):
        if backend not in cls._registry:
            raise ValueError(f"Checkpoint engine {backend} not registered, registered backends: {sorted(cls._registry)}")
        return cls._registry[backend]

    @classmethod
    def new(cls, backend, *args, **kwargs):
        return cls.get(backend)(*args, **kwargs)


class CheckpointEngine(ABC):
    wire_format = "named_tensors"

    @abstractmethod
    def prepare(self):
        raise NotImplementedError

    @classmethod
    @abstractmethod
    def build_topology(cls, actor_wg_world_size, rollout_world_size, metadata):
        raise NotImplementedError

    @abstractmethod
    def init_process_group(self, **kwargs):
        raise NotImplementedError

    @abstractmethod
    def finalize(self):
        raise NotImplementedError

    @abstractmethod
    async def send_weights(self, weights, global_steps=None):
        raise NotImplementedError

    @abstractmethod
    async def receive_weights(self, global_steps=None):
        raise NotImplementedError


def install():
    """The real verl's base module if it imports, else this mirror under its name."""
    try:
        import verl.checkpoint_engine.base as real
        return real
    except ImportError:
        pass
    base = types.ModuleType("verl.checkpoint_engine.base")
    base.CheckpointEngineRegistry, base.CheckpointEngine, base.MIRRORS = CheckpointEngineRegistry, CheckpointEngine, VERSION
    pkg, sub = types.ModuleType("verl"), types.ModuleType("verl.checkpoint_engine")
    pkg.__path__, sub.__path__ = [], []
    pkg.checkpoint_engine, sub.base = sub, base
    sys.modules.update({"verl": pkg, "verl.checkpoint_engine": sub, "verl.checkpoint_engine.base": base})
    return base
