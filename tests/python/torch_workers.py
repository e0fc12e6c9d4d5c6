"""Rank-side functions for test_torch_backend.py: torch.distributed with backend "actorcc" on
CPU tensors (each returns a list of failures)."""
import importlib
import os

import numpy as np


def _init(rank, world, port, backend="actorcc", method=None):
    import torch.distributed as dist
    import actorcc.torch  # noqa: F401  registers the backend
    if method == "env":
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
        dist.init_process_group(backend, init_method="env://")
    elif method == "store":
        from datetime import timedelta
        store = dist.TCPStore("127.0.0.1", port, world, rank == 0, timedelta(seconds=60))
        dist.init_process_group(backend, store=store, rank=rank, world_size=world)
    else:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)


def collectives(rank, world, port, method=None, backend="actorcc"):
    import torch
    import torch.distributed as dist
    _init(rank, world, port, backend, method)
    # A second import in the same worker (as a re-imported module or a second package does)
    # must not fail: registration is idempotent.
    import actorcc.torch
    importlib.reload(actorcc.torch)
    fails = matrix(rank, world, backend)
    dist.barrier()
    # a subgroup of ranks 0 and 1 (every rank calls new_group)
    sub = dist.new_group([0, 1])
    if rank in (0, 1):
        y = _values(rank, 800, 5, torch.float64)
        dist.all_reduce(y, group=sub)
        if not torch.equal(y, _values(0, 800, 5, y.dtype) + _values(1, 800, 5, y.dtype)):
            fails.append(f"new_group all_reduce: {y}")
    dist.barrier()
    if dist.get_backend() not in ("actorcc", backend):
        fails.append(f"get_backend: {dist.get_backend()}")
    fails += _cpu_dispatch(dist.distributed_c10d._get_default_group(), backend, "world")
    if rank in (0, 1):
        fails += _cpu_dispatch(sub, backend, "new_group")
    dist.destroy_process_group()
    return fails


def _values(r, case, n, dt, device="cpu"):
    """Rank r's input of case `case`: n random small integers (exact in every dtype and sum)."""
    import torch
    g = np.random.default_rng([11, r, case])
    return torch.from_numpy(g.integers(-8, 9, n)).to(device=device, dtype=dt)


def matrix(rank, world, backend, group=None, device="cpu"):
    """torch.distributed's collectives on `group` (default: the world), every value checked:
    every dtype x size x call, uneven all_to_all splits, p2p rings and pairs, async_op. The
    inputs depend on rank and position; outputs start poisoned (99). `backend` names the
    group's backend string ('gloo' in it skips what gloo lacks). Returns the failures."""
    import torch
    fails = []
    gloo = "gloo" in backend
    D = _On(group)

    def v(r, case, n, dt):
        return _values(r, case, n, dt, device)

    case = 0
    for dt in (torch.float32, torch.bfloat16, torch.int64, torch.float16, torch.int8):
        for n in (1, 7, 1001):
            case += 1
            x = v(rank, case, n, dt)
            D.all_reduce(x)
            if not torch.equal(x, sum(v(r, case, n, dt).double() for r in range(world)).to(dt)):
                fails.append(f"all_reduce {dt} n={n}")
            x = v(rank, case, n, dt)
            D.all_reduce(x, op=D.ReduceOp.MAX)
            if not torch.equal(x, torch.stack([v(r, case, n, dt) for r in range(world)]).amax(0)):
                fails.append(f"all_reduce max {dt}")
            outs = [torch.full((n,), 99, dtype=dt, device=device) for _ in range(world)]
            D.all_gather(outs, v(rank, case, n, dt))
            if not all(torch.equal(outs[r], v(r, case, n, dt)) for r in range(world)):
                fails.append(f"all_gather {dt}")
            big = torch.full((n * world,), 99, dtype=dt, device=device)
            D.all_gather_into_tensor(big, v(rank, case, n, dt))
            if not torch.equal(big, torch.cat([v(r, case, n, dt) for r in range(world)])):
                fails.append(f"all_gather_into_tensor {dt}")
            rs = torch.full((n,), 99, dtype=dt, device=device)
            D.reduce_scatter_tensor(rs, v(rank, case, n * world, dt))
            want = sum(v(r, case, n * world, dt).double() for r in range(world)).to(dt)[rank * n:(rank + 1) * n]
            if not torch.equal(rs, want):
                fails.append(f"reduce_scatter_tensor {dt}")
            if not gloo:  # torch 2.5's gloo has no list reduce_scatter
                rs2 = torch.full((n,), 99, dtype=dt, device=device)
                D.reduce_scatter(rs2, list(v(rank, case, n * world, dt).chunk(world)))
                if not torch.equal(rs2, want):
                    fails.append(f"reduce_scatter {dt}")
            b = v(rank, case, n, dt)
            D.broadcast(b, src=world - 1)
            if not torch.equal(b, v(world - 1, case, n, dt)):
                fails.append(f"broadcast {dt}")
            r0 = v(rank, case, n, dt)
            D.reduce(r0, dst=0)
            if rank == 0 and not torch.equal(r0, sum(v(r, case, n, dt).double() for r in range(world)).to(dt)):
                fails.append(f"reduce {dt}")
            # actorcc leaves non-root tensors alone; gloo uses them as scratch (torch allows both)
            if rank != 0 and backend == "actorcc" and not torch.equal(r0, v(rank, case, n, dt)):
                fails.append(f"reduce changed a non-root tensor {dt}")
            g = [torch.full((n,), 99, dtype=dt, device=device) for _ in range(world)] if rank == 1 else None
            D.gather(v(rank, case, n, dt), g, dst=1)
            if rank == 1 and not all(torch.equal(g[r], v(r, case, n, dt)) for r in range(world)):
                fails.append(f"gather {dt}")
            s = torch.full((n,), 99, dtype=dt, device=device)
            D.scatter(s, list(v(0, case, n * world, dt).chunk(world)) if rank == 0 else None, src=0)
            if not torch.equal(s, v(0, case, n * world, dt)[rank * n:(rank + 1) * n]):
                fails.append(f"scatter {dt}")
            a2a = torch.full((n * world,), 99, dtype=dt, device=device)
            D.all_to_all_single(a2a, v(rank, case, n * world, dt))
            want = torch.cat([v(r, case, n * world, dt)[rank * n:(rank + 1) * n] for r in range(world)])
            if not torch.equal(a2a, want):
                fails.append(f"all_to_all_single {dt}")
    # uneven splits (rows of 3 elements), the MoE shape
    rows = [[(s + d) % 3 for d in range(world)] for s in range(world)]  # rows[src][dst]
    x = v(rank, 500, 3 * sum(rows[rank]), torch.float32).reshape(-1, 3)
    out = torch.full((sum(rows[s][rank] for s in range(world)), 3), 99.0, device=device)
    D.all_to_all_single(out, x, [rows[s][rank] for s in range(world)], rows[rank])
    parts = []
    for s in range(world):
        src = v(s, 500, 3 * sum(rows[s]), torch.float32).reshape(-1, 3)
        off = sum(rows[s][:rank])
        parts.append(src[off:off + rows[s][rank]])
    if not torch.equal(out, torch.cat(parts)):
        fails.append("all_to_all_single with splits")
    if not gloo:  # gloo's all_to_all takes equal tensors only
        outs = [torch.full((rows[s][rank],), 99.0, device=device) for s in range(world)]
        D.all_to_all(outs, [v(rank, 600 + d, rows[rank][d], torch.float32) for d in range(world)])
        if not all(torch.equal(outs[s], v(s, 600 + rank, rows[s][rank], torch.float32)) for s in range(world)):
            fails.append("all_to_all lists")
    # point-to-point: a ring with isend/irecv in one batch, and blocking pairs
    right, left = (rank + 1) % world, (rank - 1) % world
    got = torch.full((257,), 99.0, device=device)
    reqs = D.batch_isend_irecv([D.P2POp(D.isend, v(rank, 700, 257, torch.float32), right),
                                D.P2POp(D.irecv, got, left)])
    for q in reqs:
        q.wait()
    if not torch.equal(got, v(left, 700, 257, torch.float32)):
        fails.append("batch_isend_irecv ring")
    if world % 2 == 0:
        got = torch.full((33,), 99, dtype=torch.int32, device=device)
        for leg in range(2):
            if rank % 2 == leg:
                D.send(v(rank, 701, 33, torch.int32), rank ^ 1)
            else:
                D.recv(got, rank ^ 1)
        if not torch.equal(got, v(rank ^ 1, 701, 33, torch.int32)):
            fails.append("send/recv")
    # async_op: two calls in flight, a Work waited on and a future read
    x = v(rank, 900, 100, torch.float64)
    w = D.all_reduce(x, async_op=True)
    fut = D.all_reduce(v(rank, 901, 10, torch.float64), async_op=True).get_future()
    w.wait()
    if not torch.equal(fut.wait()[0], sum(v(r, 901, 10, torch.float64) for r in range(world))) or \
            not torch.equal(x, sum(v(r, 900, 100, torch.float64) for r in range(world))):
        fails.append("async_op / future")
    return fails


class _On:
    """torch.distributed with group= bound to one group (None: the default group)."""
    _UNBOUND = ("ReduceOp", "isend", "irecv", "batch_isend_irecv")

    def __init__(self, group):
        import torch.distributed as dist
        self._dist, self._group = dist, group

    def __getattr__(self, name):
        import functools
        f = getattr(self._dist, name)
        if self._group is None or name in self._UNBOUND:
            return f
        return functools.partial(f, group=self._group)


def _cpu_dispatch(pg, backend, which):
    """Where the CPU tensors of `pg` went: with "cpu:gloo,..." to gloo, never to an actorcc
    communicator; with "actorcc" to actorcc's CPU backend."""
    import torch.distributed as dist
    cpu_comm = "cpu" in pg._comms
    if "cpu:gloo" in backend:
        if cpu_comm:
            return [f"{which}: CPU tensors reached actorcc in a {backend} group"]
        if not isinstance(pg._cpu_backend(), dist.ProcessGroupGloo):
            return [f"{which}: no gloo backend served the CPU tensors ({pg._cpu_backend()!r})"]
    elif not cpu_comm:
        return [f"{which}: CPU tensors of an actorcc group did not reach actorcc"]
    return []


def _tiny_model(device="cpu"):
    import torch
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).double().to(device)


def _batch(step, world, device="cpu"):
    """The whole batch of a step (4 rows per rank); rank r trains on rows [4r, 4r + 4)."""
    import torch
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(4 * world, 8, generator=g, dtype=torch.float64)
    return x.to(device), torch.randn(4 * world, 2, generator=g, dtype=torch.float64).to(device)


def _train(m, rank, world, steps, shard=True, device="cpu"):
    import torch
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for s in range(steps):
        x, y = _batch(s, world, device)
        if shard:
            x, y = x[rank * 4:(rank + 1) * 4], y[rank * 4:(rank + 1) * 4]
        opt.zero_grad()
        torch.nn.functional.mse_loss(m(x), y).backward()
        opt.step()


def _against_reference(flat, rank, world, steps, what):
    """`flat` (this rank's trained parameters) against each other rank's and a single-process
    run on the whole batch (the ranks' averaged gradients are the whole batch's)."""
    import torch
    import torch.distributed as dist
    fails = []
    ref = _tiny_model(flat.device)
    _train(ref, rank, world, steps, shard=False, device=flat.device)
    want = torch.cat([p.detach().reshape(-1) for p in ref.parameters()])
    if not torch.allclose(flat, want, rtol=1e-10, atol=1e-12):
        fails.append(f"{what} params differ from the single-process reference by {(flat - want).abs().max().item()}")
    everyone = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat)
    if not all(torch.equal(everyone[0], e) for e in everyone):
        fails.append(f"{what} params differ across ranks")
    if (flat - model_params(_tiny_model, flat.device)).abs().max().item() == 0:
        fails.append(f"{what} did not train (parameters unchanged)")
    return fails


def ddp(rank, world, port, steps, with_hook):
    import torch.distributed as dist
    _init(rank, world, port)
    fails = ddp_matches_reference(rank, world, steps, with_hook)
    dist.destroy_process_group()
    return fails


def ddp_matches_reference(rank, world, steps, with_hook, group=None, device="cpu"):
    """DDP on a tiny model over `group`: every rank's parameters after `steps` must equal each
    other and a single-process run on the whole batch (DDP averages the shards' gradients)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    dev = torch.device(device)
    m = DDP(_tiny_model(dev), process_group=group, device_ids=[dev.index or 0] if dev.type == "cuda" else None)
    if with_hook:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        m.register_comm_hook(group, default_hooks.allreduce_hook)
    _train(m, rank, world, steps, device=dev)
    flat = torch.cat([p.detach().reshape(-1) for p in m.module.parameters()])
    return _against_reference(flat, rank, world, steps, "DDP")


def fsdp2(rank, world, port, steps):
    import torch.distributed as dist
    _init(rank, world, port)
    fails = fsdp2_matches_reference(rank, world, steps)
    dist.destroy_process_group()
    return fails


def fsdp2_matches_reference(rank, world, steps, group=None, device="cpu"):
    """FSDP2 (fully_shard, every layer and the root) on the tiny model over a device mesh of
    `group`: the parameters, gathered whole after `steps`, must equal a single-process run.
    The all-gathers and reductions on the group are counted: they must have happened."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # torch < 2.6
        from torch.distributed._composable.fsdp import fully_shard
    pg = group or dist.distributed_c10d._get_default_group()
    calls = {"all_gather": 0, "reduce": 0}
    names = {"_allgather_base": "all_gather", "allgather_into_tensor_coalesced": "all_gather",
             "all_gather_single": "all_gather", "all_gather_single_coalesced": "all_gather",
             "_reduce_scatter_base": "reduce", "reduce_scatter_tensor_coalesced": "reduce",
             "reduce_scatter_single": "reduce", "reduce_scatter_single_coalesced": "reduce", "allreduce": "reduce"}
    if pg.name() == "actorcc":  # torch's own groups are C++ objects: no Python methods to count
        for name, kind in names.items():
            def counted(*a, _f=getattr(pg, name), _k=kind, **k):
                calls[_k] += 1
                return _f(*a, **k)
            setattr(pg, name, counted)
    dev = torch.device(device)
    mesh = DeviceMesh.from_group(pg, dev.type)
    m = _tiny_model(dev)
    for layer in m:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    _train(m, rank, world, steps, device=dev)
    flat = torch.cat([p.full_tensor().detach().reshape(-1) for p in m.parameters()])
    fails = _against_reference(flat, rank, world, steps, "FSDP2")
    if pg.name() == "actorcc" and (not calls["all_gather"] or not calls["reduce"]):
        fails.append(f"FSDP2's collectives did not reach actorcc: {calls}")
    return fails


def model_params(make, device="cpu"):
    import torch
    return torch.cat([p.detach().reshape(-1) for p in make(device).parameters()])
