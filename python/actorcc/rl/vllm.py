"""vLLM's weight transfer engine "actorcc" (vLLM 0.33, vllm/distributed/weight_transfer/: the worker
side WeightTransferEngine and the trainer side TrainerWeightTransferEngine), on actorcc.weight_sync.

Registration: actorcc's package declares actorcc.rl.vllm_plugin:register in vLLM's
`vllm.general_plugins` entry-point group, which vLLM loads in every process it starts (engine core and workers), so
weight_transfer_config={"backend": "actorcc"} works with no other setup. In the trainer:

    engine = WeightTransferTrainerFactory.trainer_init(
        "actorcc", config, ActorccTrainerInitInfo(rank=trainer_rank, world_size=1 + n_vllm_workers),
        client=client, source=ModuleSource(model))
    engine.send_weights()              # each sync

The trainer's rank 0 makes the group's UniqueId and hands it to the workers through the client's
init_weight_transfer_engine; each worker joins at rank 1 + its rank in its vLLM instance (plus
rank_offset for the instances before it). send_weights runs the workers' update_weights
(receive_weights: every bucket loaded with model.load_weights as it arrives) concurrently with
the trainer's broadcast. A vLLM worker that dies during a sync: the trainer and the other workers
finish it (the group shrinks); the client's call to the dead worker fails on its own.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from vllm.distributed.weight_transfer.base import (
    TrainerInitInfo,
    TrainerWeightTransferEngine,
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)

from .. import weight_sync as _ws
from . import _group

BACKEND = "actorcc"
GROUP = "vllm_weights"


@dataclass
class ActorccInitInfo(WeightTransferInitInfo):
    """What a vLLM worker needs to join: the group's id, its size, the rank of this instance's
    first worker (1 for the first instance: the trainer is rank 0), actorcc's options."""

    uid: str = ""
    world_size: int = 0
    rank_offset: int = 1
    timeout: float = 60.0
    join_timeout: float = 120.0
    comm_backend: str = "auto"


@dataclass
class ActorccUpdateInfo(WeightTransferUpdateInfo):
    """Names, shapes and dtypes travel with the weights (the trainer's plan), so nothing is needed."""

    verify: bool = False


@dataclass
class ActorccTrainerInitInfo(TrainerInitInfo):
    world_size: int = 0
    bucket_bytes: int = _ws.DEFAULT_BUCKET_BYTES
    timeout: float = 60.0
    join_timeout: float = 120.0
    comm_backend: str = "auto"
    verify: bool = False
    rank_offsets: list = field(default_factory=lambda: [1])


def _worker_rank(parallel_config):
    """This worker's rank within its vLLM instance."""
    rank = getattr(parallel_config, "rank", None)
    if rank is not None:
        return int(rank)
    import torch.distributed as dist
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


class ActorccWeightTransferEngine(WeightTransferEngine):
    init_info_cls = ActorccInitInfo
    update_info_cls = ActorccUpdateInfo

    def init_transfer_engine(self, init_info):
        rank = init_info.rank_offset + _worker_rank(self.parallel_config)
        _group.join(GROUP, init_info.uid, rank, init_info.world_size, timeout=init_info.timeout,
                    join_timeout=init_info.join_timeout, backend=init_info.comm_backend)

    def start_weight_update(self):
        pass  # weights are loaded in place with model.load_weights: no layerwise reload to begin

    def finish_weight_update(self):
        pass

    def receive_weights(self, update_info):
        receiver = _ws.Receiver(GROUP, verify=update_info.verify)
        for batch in receiver.receive_buckets():
            self.model.load_weights(weights=batch)
        return receiver.report

    def shutdown(self):
        _group.leave(GROUP)

    @staticmethod
    def trainer_send_weights(iterator, trainer_args):
        """The trainer's side without a TrainerWeightTransferEngine: the trainer process must be
        rank 0 of the group already (ActorccTrainerEngine.trainer_init formed it)."""
        args = dict(trainer_args or {})
        return _ws.Sender(args.get("group", GROUP), bucket_bytes=args.get("bucket_bytes", _ws.DEFAULT_BUCKET_BYTES),
                          verify=args.get("verify", False)).send(iterator)


def _concurrently(fn, *args):
    """Runs fn(*args) in a thread; the returned join() re-raises what it raised."""
    out = {}

    def run():
        try:
            out["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised by join()
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def join():
        t.join()
        if "error" in out:
            raise out["error"]
        return out.get("value")

    return join


class ActorccTrainerEngine(TrainerWeightTransferEngine):
    init_info_cls = ActorccTrainerInitInfo
    config_cls = object

    @classmethod
    def trainer_init(cls, config, init_info, *, client, source):
        self = cls(config, client=client, source=source, is_sender=init_info.rank == 0)
        self.info = init_info
        self.report = None
        if self.is_sender:
            uid = _group.new_uid()
            worker_info = {"uid": uid, "world_size": init_info.world_size, "rank_offset": init_info.rank_offsets[0],
                           "timeout": init_info.timeout, "join_timeout": init_info.join_timeout,
                           "comm_backend": init_info.comm_backend}
            # the workers join inside the client's call while the trainer joins here
            workers = _concurrently(client.init_weight_transfer_engine, worker_info)
            _group.join(GROUP, uid, 0, init_info.world_size, timeout=init_info.timeout,
                        join_timeout=init_info.join_timeout, backend=init_info.comm_backend)
            workers()
        return self

    def send_weights(self):
        named = list(self.source)  # every trainer rank iterates: materializing may be collective
        if not self.is_sender:
            return None
        self.client.start_weight_update()
        workers = _concurrently(self.client.update_weights, {"verify": self.info.verify})
        self.report = _ws.Sender(GROUP, bucket_bytes=self.info.bucket_bytes, verify=self.info.verify).send(named)
        # The sync is done for every worker still in the group. A worker lost in it makes the
        # client's calls fail (they go to every worker): said in the report, not raised.
        self.report["client_errors"] = []
        for call in (workers, self.client.finish_weight_update):
            try:
                call()
            except Exception as e:  # noqa: BLE001
                if not self.report["lost"]:
                    raise
                self.report["client_errors"].append(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        return self.report

    def shutdown(self):
        _group.leave(GROUP)
