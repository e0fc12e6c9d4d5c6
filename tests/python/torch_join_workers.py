"""Rank functions for test_torch_join.py: torch.distributed with backend "actorcc" (CPU tensors)
where one rank's mistake or absence must fail the others within the group's timeout, naming it."""
import time
from datetime import timedelta

CULPRIT = 2


def _outcome(fn):
    t0 = time.monotonic()
    try:
        fn()
        return "ok", time.monotonic() - t0, None, ""
    except Exception as e:  # noqa: BLE001 - the test reads the kind, the text and the culprit
        return type(e).__name__, time.monotonic() - t0, getattr(e, "culprit", None), str(e)


def world_size_mismatch(rank, world, port, timeout_s):
    """Rank CULPRIT is given world_size + 1; every rank then makes one all_reduce."""
    import torch
    import torch.distributed as dist
    import actorcc.torch  # noqa: F401  registers the backend

    def run():
        dist.init_process_group("actorcc", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world + 1 if rank == CULPRIT else world,
                                timeout=timedelta(seconds=timeout_s))
        dist.all_reduce(torch.ones(8))
    return _outcome(run)


def rank0_never_calls(rank, world, port, timeout_s, store_timeout_s, absent_s):
    """A TCPStore of its own with a long timeout; the group's timeout is short. Rank 0 makes no
    call for `absent_s` seconds; the others' first all_reduce must fail within the group's. The
    group's device is taken as unknown at its creation (as in a GPU process given no device_id),
    so the communicator is formed by the first call: on CPU init_process_group would form it."""
    import torch
    import torch.distributed as dist
    import actorcc.torch as at
    at.backend._eager_device = lambda torch_pg: None

    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, timedelta(seconds=store_timeout_s))
    dist.init_process_group("actorcc", store=store, rank=rank, world_size=world, timeout=timedelta(seconds=timeout_s))
    if rank == 0:
        time.sleep(absent_s)
        return "absent", absent_s, None, ""
    return _outcome(lambda: dist.all_reduce(torch.ones(8)))
