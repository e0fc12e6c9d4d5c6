"""Rank functions for test_torch_eager.py: which actorcc communicators a torch.distributed group
has formed when init_process_group and new_group return (CPU tensors; each returns a list of
failures)."""
import contextlib


@contextlib.contextmanager
def _no_new_communicator():
    """Any actorcc communicator the torch backend forms meanwhile raises: the calls inside must
    run on the communicators formed before."""
    from actorcc.torch import process_group as at
    made = at.Communicator

    def refuse(*args, **kwargs):
        raise AssertionError("a communicator was formed by a call, not by the group's creation")
    at.Communicator = refuse
    try:
        yield
    finally:
        at.Communicator = made


def _sum_check(dist, torch, rank, ranks, group, what):
    x = torch.full((1024,), float(rank + 1))
    dist.all_reduce(x, group=group)
    want = float(sum(r + 1 for r in ranks))
    return [] if bool((x == want).all()) else [f"{what}: all_reduce gave {x[:4].tolist()}, want {want}"]


def formed_at_creation(rank, world, port, backend, device_id, lazy):
    """init_process_group(backend), then new_group([0, 1]): the communicators each group has
    formed before any call, then a call on each (with `lazy`, this process stands for one whose
    group's device is unknown at creation: a GPU process given no device_id)."""
    import torch
    import torch.distributed as dist
    import actorcc.torch as at
    if lazy:
        at.backend._eager_device = lambda torch_pg: None
    kwargs = {"device_id": torch.device("cpu", 0)} if device_id else {}
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, **kwargs)
    pg = dist.distributed_c10d._get_default_group()
    fails = []
    want = [] if lazy or "cpu:gloo" in backend else ["cpu"]
    if sorted(pg._comms) != want:
        fails.append(f"world: communicators {sorted(pg._comms)} after init_process_group, want {want}")
    if device_id and pg.bound_device_id != torch.device("cpu", 0):
        fails.append(f"world: bound_device_id {pg.bound_device_id}, want cpu:0")
    sub = dist.new_group([0, 1])
    if rank in (0, 1) and sorted(sub._comms) != want:
        fails.append(f"new_group: communicators {sorted(sub._comms)} after new_group, want {want}")
    with contextlib.nullcontext() if want != ["cpu"] else _no_new_communicator():
        fails += _sum_check(dist, torch, rank, range(world), None, "world")
        if rank in (0, 1):
            fails += _sum_check(dist, torch, rank, (0, 1), sub, "new_group")
    if "cpu:gloo" in backend and (pg._comms or rank in (0, 1) and sub._comms):
        fails.append(f"CPU tensors of a {backend} group reached actorcc: {sorted(pg._comms)} {sorted(sub._comms)}")
    if lazy and sorted(pg._comms) != ["cpu"]:
        fails.append(f"lazy: the first call formed {sorted(pg._comms)}, want ['cpu']")
    dist.barrier()
    dist.destroy_process_group()
    return fails


def formed_on_gpu(rank, world, port, device_id):
    """On a GPU process: with device_id (GPU 0, which the ranks share), init_process_group forms
    the CUDA communicator and new_group inherits the device and forms its own; without it, the
    device is unknown until the first call (CPU or CUDA tensors may come), which forms it."""
    import torch
    import torch.distributed as dist
    import actorcc.torch  # noqa: F401  registers the backend
    torch.cuda.set_device(0)
    kwargs = {"device_id": torch.device("cuda", 0)} if device_id else {}
    dist.init_process_group("actorcc", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, **kwargs)
    pg = dist.distributed_c10d._get_default_group()
    want = ["cuda"] if device_id else []
    fails = []
    if sorted(pg._comms) != want:
        fails.append(f"world: communicators {sorted(pg._comms)} after init_process_group, want {want}")
    sub = dist.new_group(list(range(world)))
    if sorted(sub._comms) != want:
        fails.append(f"new_group: communicators {sorted(sub._comms)} after new_group, want {want}")
    if device_id and sub.bound_device_id != torch.device("cuda", 0):
        fails.append(f"new_group: bound_device_id {sub.bound_device_id}, want cuda:0")
    with contextlib.nullcontext() if not device_id else _no_new_communicator():
        for group, what in ((None, "world"), (sub, "new_group")):
            x = torch.full((1024,), float(rank + 1), device="cuda")
            dist.all_reduce(x, group=group)
            torch.cuda.synchronize()
            want_sum = float(sum(r + 1 for r in range(world)))
            if not bool((x == want_sum).all()):
                fails.append(f"{what}: all_reduce gave {x[:4].tolist()}, want {want_sum}")
    if sorted(pg._comms) != ["cuda"]:
        fails.append(f"world: communicators {sorted(pg._comms)} after the calls, want ['cuda']")
    dist.barrier()
    dist.destroy_process_group()
    return fails
