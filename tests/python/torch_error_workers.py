"""Rank-side functions for test_torch_errors.py: torch.distributed with backend "actorcc" on
CPU tensors where one rank fails (dies, stalls, makes a mismatched call or one the backend
refuses, aborts). The others' pending Work must raise naming it, through wait(),
is_completed() and the future, within the group's timeout."""
import os
import time
from datetime import timedelta

import numpy as np

TIMEOUT_S = 3.0
CULPRIT = 1


def _init(rank, world, port):
    import torch.distributed as dist
    import actorcc.torch  # noqa: F401  registers the backend
    dist.init_process_group("actorcc", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=TIMEOUT_S))


def _values(rank, n, seed):
    import torch
    return torch.from_numpy(np.random.default_rng([seed, rank]).standard_normal(n))


def _fail(how, rank, world):
    """What the culprit does instead of its next call."""
    import torch
    import torch.distributed as dist
    if how == "dies":
        os._exit(7)
    if how == "stalls":
        time.sleep(TIMEOUT_S + 2)
        return None
    if how == "refuses":  # a different count: every rank's call is refused, naming both calls
        x = _values(rank, 1000, 5)
        try:
            dist.all_reduce(x)
        except Exception as e:  # noqa: BLE001 - reported to the test
            return type(e).__name__, str(e)
        return None
    if how == "refuses_op":  # an op this backend cannot run, on this rank only
        try:
            dist.all_reduce(_values(rank, 4099, 9), op=dist.ReduceOp.BAND)
        except Exception as e:  # noqa: BLE001 - reported to the test
            return type(e).__name__, str(e)
        return None
    if how == "aborts":
        dist.distributed_c10d._get_default_group().abort()
        return None
    raise ValueError(how)


def pending_work_raises(rank, world, port, how):
    """Two good calls (results checked), then the culprit fails while the others have an
    async all_reduce pending. Returns (failures, {check: message}) of this rank."""
    import torch
    import torch.distributed as dist
    _init(rank, world, port)
    fails, seen = [], {}
    for step in range(2):
        x = _values(rank, 257 + step, step)
        dist.all_reduce(x)
        want = sum(_values(r, 257 + step, step) for r in range(world))
        if not torch.allclose(x, want, rtol=1e-12, atol=1e-12):
            fails.append(f"step {step}: wrong sum before the failure")
    # The culprit fails only once every other rank is past the good calls (an abort sooner
    # would fail those instead).
    store = dist.distributed_c10d._get_default_store()
    if rank != CULPRIT:
        store.set(f"past-good-calls/{rank}", "1")
    else:
        store.wait([f"past-good-calls/{r}" for r in range(world) if r != CULPRIT])
        out = _fail(how, rank, world)
        if how.startswith("refuses") and out is None:
            fails.append("the culprit's own refused call did not raise")
        elif out is not None:
            seen["culprit"] = f"{out[0]}: {out[1]}"
        dist.destroy_process_group()
        return fails, seen
    x = _values(rank, 999 if how == "refuses" else 4099, 9)
    t0 = time.monotonic()
    work = dist.all_reduce(x, async_op=True)
    fut = work.get_future()
    checks = {
        "wait": work.wait,
        "future": fut.wait,
        "is_completed": lambda: _poll(work),
        "next call": lambda: dist.all_reduce(_values(rank, 16, 10)),
    }
    for name, check in checks.items():
        try:
            check()
            fails.append(f"{name}: returned after rank {CULPRIT} {how}")
        except Exception as e:  # noqa: BLE001 - every kind must name the culprit
            seen[name] = f"{type(e).__name__}: {e}"
    took = time.monotonic() - t0
    if took > TIMEOUT_S + 4:
        fails.append(f"the errors took {took:.1f} s (group timeout {TIMEOUT_S} s)")
    if work.is_success():
        fails.append("is_success() is not False for the failed call")
    dist.destroy_process_group()
    return fails, seen


def _poll(work):
    deadline = time.monotonic() + TIMEOUT_S + 4
    while not work.is_completed():
        if time.monotonic() > deadline:
            raise AssertionError("never completed")
        time.sleep(0.01)


def ddp_peer_dies(rank, world, port):
    """DDP on a small model: the culprit dies after two steps; the others' next backward must
    raise (through the comm hook's future) naming it, within the group's timeout."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    _init(rank, world, port)
    torch.manual_seed(0)
    m = DDP(torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2)))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    store = dist.distributed_c10d._get_default_store()
    for step in range(4):
        if step == 2 and rank != CULPRIT:
            store.set(f"past-step-1/{rank}", "1")
        if step == 2 and rank == CULPRIT:  # once the others are past step 1 (see above)
            store.wait([f"past-step-1/{r}" for r in range(world) if r != CULPRIT])
            os._exit(7)
        x, y = torch.randn(4, 8, generator=g), torch.randn(4, 2, generator=g)
        t0 = time.monotonic()
        try:
            opt.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            opt.step()
        except Exception as e:  # noqa: BLE001 - the failure under test
            return step, time.monotonic() - t0, f"{type(e).__name__}: {e}"
    return None


def root_rank_dies(rank, world, port):
    """Rank 0, whose process hosts the actorcc group's root in torch mode, dies after a good call;
    the others' next call must say that rank 0 died and name it. Returns (message, culprit)."""
    import torch.distributed as dist
    _init(rank, world, port)
    x = _values(rank, 33, 1)
    dist.all_reduce(x)
    store = dist.distributed_c10d._get_default_store()
    if rank != 0:
        store.set(f"past-good-call/{rank}", "1")
    else:
        store.wait([f"past-good-call/{r}" for r in range(1, world)])
        os._exit(7)
    time.sleep(0.5)  # let rank 0 go before this rank calls again
    try:
        dist.all_reduce(_values(rank, 33, 2))
        return "returned", None
    except Exception as e:  # noqa: BLE001 - the test reads the text and the culprit
        return f"{type(e).__name__}: {e}", getattr(e, "culprit", None)
