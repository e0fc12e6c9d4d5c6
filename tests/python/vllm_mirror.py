"""vLLM 0.33's weight-transfer interface (vllm/distributed/weight_transfer/base.py and factory.py:
the WeightTransferEngine and TrainerWeightTransferEngine base classes, their info dataclasses, and
the two factories' register_engine / create_engine / trainer_init), mirrored for the tests: vLLM
does not install on CI's CPU machines. install() puts it in sys.modules under vLLM's names unless
the real vLLM imports."""
import importlib
import sys
import types
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

VERSION = "0.33"


@dataclass
class WeightTransferInitInfo(ABC):  # noqa: B024
    pass


@dataclass
class TrainerInitInfo(WeightTransferInitInfo):
    rank: int = field(kw_only=True)


@dataclass
class WeightTransferUpdateInfo(ABC):  # noqa: B024
    pass


class WeightTransferEngine(ABC):
    init_info_cls = None
    update_info_cls = None

    def __init__(self, config, vllm_config, device, model):
        self.config, self.vllm_config, self.device, self.model = config, vllm_config, device, model
        self.parallel_config = vllm_config.parallel_config
        self.model_config = vllm_config.model_config

    def parse_init_info(self, init_dict):
        try:
            return self.init_info_cls(**init_dict)
        except TypeError as e:
            raise ValueError(f"Invalid init_info for {type(self).__name__}: {e}") from e

    def parse_update_info(self, update_dict):
        try:
            return self.update_info_cls(**update_dict)
        except TypeError as e:
            raise ValueError(f"Invalid update_info for {type(self).__name__}: {e}") from e

    @abstractmethod
    def init_transfer_engine(self, init_info): ...

    @abstractmethod
    def start_weight_update(self): ...

    @abstractmethod
    def finish_weight_update(self): ...

    def update_weights(self, update_info):
        self.receive_weights(self.parse_update_info(update_info))

    @abstractmethod
    def receive_weights(self, update_info): ...

    @abstractmethod
    def shutdown(self): ...

    @staticmethod
    @abstractmethod
    def trainer_send_weights(iterator, trainer_args): ...


class TrainerWeightTransferEngine(ABC):
    init_info_cls = None
    config_cls = None

    def __init__(self, config, *, client, source, is_sender=True):
        self.config, self.client, self.source, self.is_sender = config, client, source, is_sender

    @classmethod
    @abstractmethod
    def trainer_init(cls, config, init_info, *, client, source): ...

    @abstractmethod
    def send_weights(self): ...


def _factory(kind):
    class Factory:
        _registry = {}

        @classmethod
        def register_engine(cls, name, module_path_or_cls, class_name=None):
            if name in cls._registry:
                raise ValueError(f"Weight transfer {kind} '{name}' is already registered.")
            if isinstance(module_path_or_cls, str):
                if class_name is None:
                    raise ValueError("class_name is required when registering with module path")
                cls._registry[name] = lambda: getattr(importlib.import_module(module_path_or_cls), class_name)
            else:
                cls._registry[name] = lambda: module_path_or_cls
    return Factory


class WeightTransferEngineFactory(_factory("engine")):
    @classmethod
    def create_engine(cls, config, vllm_config, device, model):
        if config.backend not in cls._registry:
            raise ValueError(f"Invalid weight transfer backend: {config.backend}. Available engines: {list(cls._registry)}")
        return cls._registry[config.backend]()(config, vllm_config, device, model)


class WeightTransferTrainerFactory(_factory("trainer engine")):
    @classmethod
    def trainer_init(cls, backend, config, init_info, *, client, source):
        if backend not in cls._registry:
            raise ValueError(f"Invalid weight transfer backend: {backend}. Available trainer engines: {list(cls._registry)}")
        return cls._registry[backend]().trainer_init(config=config, init_info=init_info, client=client, source=source)


def install():
    """(base, factory): the real vLLM's modules if they import, else this mirror under their names."""
    try:
        import vllm.distributed.weight_transfer.base as base
        import vllm.distributed.weight_transfer.factory as factory
        return base, factory
    except ImportError:
        pass
    if "vllm.distributed.weight_transfer.base" in sys.modules:
        return sys.modules["vllm.distributed.weight_transfer.base"], sys.modules["vllm.distributed.weight_transfer.factory"]
    names = ["vllm", "vllm.distributed", "vllm.distributed.weight_transfer"]
    mods = {n: types.ModuleType(n) for n in names}
    for m in mods.values():
        m.__path__ = []
    base, factory = types.ModuleType(names[-1] + ".base"), types.ModuleType(names[-1] + ".factory")
    for k in ("WeightTransferInitInfo", "TrainerInitInfo", "WeightTransferUpdateInfo", "WeightTransferEngine",
              "TrainerWeightTransferEngine"):
        setattr(base, k, globals()[k])
    factory.WeightTransferEngineFactory, factory.WeightTransferTrainerFactory = WeightTransferEngineFactory, WeightTransferTrainerFactory
    base.MIRRORS = factory.MIRRORS = VERSION
    mods[base.__name__], mods[factory.__name__] = base, factory
    sys.modules.update(mods)
    return base, factory
