"""Rank functions for test_suspend.py (spawned processes import them by module name)."""
import time

import numpy as np

import actorcc


def _segment_mappings():
    with open("/proc/self/maps") as f:
        return sum("/dev/shm/actorcc-" in line for line in f)


def _refused(call):
    """How the call failed while suspended: (exception type, seconds, text)."""
    t0 = time.monotonic()
    try:
        call()
    except actorcc.Error as e:
        return type(e).__name__, time.monotonic() - t0, str(e)
    return "returned", time.monotonic() - t0, ""


def cycles(rank, world, uid, n):
    """n suspend/resume cycles with exact all_reduce and all_to_all; what each suspended state
    looked like (mappings, mem_stats, the refused calls) for the test to check."""
    c = actorcc.Communicator(uid, rank, world, backend="cpu", timeout=20, join_timeout=20)
    seen = []
    for k in range(n):
        x = (np.arange(300001, dtype=np.int64) % 101) + 1000 * rank + k
        pending = c.all_reduce(x, async_op=True)  # suspend() waits for it
        a2a = np.full(world * 7, rank * 10 + k, dtype=np.float32)
        c.suspend()
        pending.wait()
        want = (np.arange(300001, dtype=np.int64) % 101) * world + 1000 * world * (world - 1) // 2 + world * k
        exact = bool(np.array_equal(x, want))
        state = dict(exact=exact, maps=_segment_mappings(), stats=c.mem_stats(), suspended=c.suspended,
                     all_reduce=_refused(lambda: c.all_reduce(np.ones(8, np.float32))),
                     all_to_all=_refused(lambda: c.all_to_all(a2a)),
                     barrier=_refused(c.barrier))
        c.resume()
        out = c.all_to_all(a2a)
        state["a2a_exact"] = bool(np.array_equal(out, np.repeat(np.arange(world, dtype=np.float32) * 10 + k, 7)))
        state["stats_after"] = c.mem_stats()
        seen.append(state)
    c.close()
    return seen


def torch_backend(rank, world, port):
    """init_process_group("actorcc") on CPU tensors: suspend, a refused call, memory_stats,
    resume, exact again."""
    import torch
    import torch.distributed as dist
    import actorcc.torch  # noqa: F401  registers the backend
    dist.init_process_group("actorcc", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    pg = dist.group.WORLD
    x = torch.full((5000,), float(rank + 1), dtype=torch.float64)
    dist.all_reduce(x)
    first = bool(torch.equal(x, torch.full((5000,), world * (world + 1) / 2, dtype=torch.float64)))
    active = pg.memory_stats()
    pg.suspend()
    during = pg.memory_stats()
    maps = _segment_mappings()
    refused = _refused(lambda: dist.all_reduce(torch.ones(4)))
    pg.resume()
    results = []
    for k in range(3):
        y = torch.full((300000,), float(rank + k), dtype=torch.float64)
        dist.all_reduce(y)
        results.append(bool(torch.equal(y, torch.full_like(y, world * (world - 1) / 2 + world * k))))
    after = pg.memory_stats()
    dist.destroy_process_group()
    return dict(first=first, active=active, during=during, maps=maps, refused=refused, results=results, after=after)


def refused_across_nodes(rank, world, uid):
    """A group over two virtual nodes (the hierarchical CPU backend) cannot suspend: every rank
    refuses at once, and the group goes on."""
    c = actorcc.Communicator(uid, rank, world, backend="cpu", timeout=20, join_timeout=20)
    outcome = _refused(c.suspend)
    x = np.full(100, rank + 1.0, dtype=np.float32)
    c.all_reduce(x)
    ok = bool(np.all(x == world * (world + 1) / 2)) and not c.suspended
    c.close()
    return outcome, ok
