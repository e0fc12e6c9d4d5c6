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
    fails = []
    # A second import in the same worker (as a re-imported module or a second package does)
    # must not fail: registration is idempotent.
    import actorcc.torch
    importlib.reload(actorcc.torch)

    def v(r, case, n, dt):
        g = np.random.default_rng([11, r, case])
        return torch.from_numpy(g.integers(-8, 9, n)).to(dt)

    case = 0
    for dt in (torch.float32, torch.bfloat16, torch.int64, torch.float16, torch.int8):
        for n in (1, 7, 1001):
            case += 1
            x = v(rank, case, n, dt)
            dist.all_reduce(x)
            if not torch.equal(x, sum(v(r, case, n, dt).double() for r in range(world)).to(dt)):
                fails.append(f"all_reduce {dt} n={n}")
            x = v(rank, case, n, dt)
            dist.all_reduce(x, op=dist.ReduceOp.MAX)
            if not torch.equal(x, torch.stack([v(r, case, n, dt) for r in range(world)]).amax(0)):
                fails.append(f"all_reduce max {dt}")
            outs = [torch.full((n,), 99, dtype=dt) for _ in range(world)]
            dist.all_gather(outs, v(rank, case, n, dt))
            if not all(torch.equal(outs[r], v(r, case, n, dt)) for r in range(world)):
                fails.append(f"all_gather {dt}")
            big = torch.full((n * world,), 99, dtype=dt)
            dist.all_gather_into_tensor(big, v(rank, case, n, dt))
            if not torch.equal(big, torch.cat([v(r, case, n, dt) for r in range(world)])):
                fails.append(f"all_gather_into_tensor {dt}")
            rs = torch.full((n,), 99, dtype=dt)
            dist.reduce_scatter_tensor(rs, v(rank, case, n * world, dt))
            want = sum(v(r, case, n * world, dt).double() for r in range(world)).to(dt)[rank * n:(rank + 1) * n]
            if not torch.equal(rs, want):
                fails.append(f"reduce_scatter_tensor {dt}")
            if "cpu:gloo" not in backend:  # torch 2.5's gloo has no list reduce_scatter
                rs2 = torch.full((n,), 99, dtype=dt)
                dist.reduce_scatter(rs2, list(v(rank, case, n * world, dt).chunk(world)))
                if not torch.equal(rs2, want):
                    fails.append(f"reduce_scatter {dt}")
            b = v(rank, case, n, dt)
            dist.broadcast(b, src=world - 1)
            if not torch.equal(b, v(world - 1, case, n, dt)):
                fails.append(f"broadcast {dt}")
            r0 = v(rank, case, n, dt)
            dist.reduce(r0, dst=0)
            if rank == 0 and not torch.equal(r0, sum(v(r, case, n, dt).double() for r in range(world)).to(dt)):
                fails.append(f"reduce {dt}")
            # actorcc leaves non-root tensors alone; gloo uses them as scratch (torch allows both)
            if rank != 0 and "cpu:gloo" not in backend and not torch.equal(r0, v(rank, case, n, dt)):
                fails.append(f"reduce changed a non-root tensor {dt}")
            g = [torch.full((n,), 99, dtype=dt) for _ in range(world)] if rank == 1 else None
            dist.gather(v(rank, case, n, dt), g, dst=1)
            if rank == 1 and not all(torch.equal(g[r], v(r, case, n, dt)) for r in range(world)):
                fails.append(f"gather {dt}")
            s = torch.full((n,), 99, dtype=dt)
            dist.scatter(s, list(v(0, case, n * world, dt).chunk(world)) if rank == 0 else None, src=0)
            if not torch.equal(s, v(0, case, n * world, dt)[rank * n:(rank + 1) * n]):
                fails.append(f"scatter {dt}")
            a2a = torch.full((n * world,), 99, dtype=dt)
            dist.all_to_all_single(a2a, v(rank, case, n * world, dt))
            want = torch.cat([v(r, case, n * world, dt)[rank * n:(rank + 1) * n] for r in range(world)])
            if not torch.equal(a2a, want):
                fails.append(f"all_to_all_single {dt}")
    # uneven splits (rows of 3 elements), the MoE shape
    rows = [[(s + d) % 3 for d in range(world)] for s in range(world)]  # rows[src][dst]
    x = v(rank, 500, 3 * sum(rows[rank]), torch.float32).reshape(-1, 3)
    out = torch.full((sum(rows[s][rank] for s in range(world)), 3), 99.0)
    dist.all_to_all_single(out, x, [rows[s][rank] for s in range(world)], rows[rank])
    parts = []
    for s in range(world):
        src = v(s, 500, 3 * sum(rows[s]), torch.float32).reshape(-1, 3)
        off = sum(rows[s][:rank])
        parts.append(src[off:off + rows[s][rank]])
    if not torch.equal(out, torch.cat(parts)):
        fails.append("all_to_all_single with splits")
    if "cpu:gloo" not in backend:  # gloo's all_to_all takes equal tensors only
        outs = [torch.full((rows[s][rank],), 99.0) for s in range(world)]
        dist.all_to_all(outs, [v(rank, 600 + d, rows[rank][d], torch.float32) for d in range(world)])
        if not all(torch.equal(outs[s], v(s, 600 + rank, rows[s][rank], torch.float32)) for s in range(world)):
            fails.append("all_to_all lists")
    # point-to-point: a ring with isend/irecv in one batch, and blocking pairs
    right, left = (rank + 1) % world, (rank - 1) % world
    got = torch.full((257,), 99.0)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, v(rank, 700, 257, torch.float32), right),
                                   dist.P2POp(dist.irecv, got, left)])
    for q in reqs:
        q.wait()
    if not torch.equal(got, v(left, 700, 257, torch.float32)):
        fails.append("batch_isend_irecv ring")
    if world % 2 == 0:
        got = torch.full((33,), 99, dtype=torch.int32)
        for leg in range(2):
            if rank % 2 == leg:
                dist.send(v(rank, 701, 33, torch.int32), rank ^ 1)
            else:
                dist.recv(got, rank ^ 1)
        if not torch.equal(got, v(rank ^ 1, 701, 33, torch.int32)):
            fails.append("send/recv")
    # async_op: a Work whose future holds the result
    x = torch.ones(100)
    w = dist.all_reduce(x, async_op=True)
    w.wait()
    fut = dist.all_reduce(torch.ones(10), async_op=True).get_future()
    if not torch.equal(fut.wait()[0], torch.full((10,), float(world))) or not torch.equal(x, torch.full((100,), float(world))):
        fails.append("async_op / future")
    dist.barrier()
    # a subgroup of ranks 0 and 1 (every rank calls new_group)
    sub = dist.new_group([0, 1])
    if rank in (0, 1):
        y = torch.full((5,), float(rank + 1))
        dist.all_reduce(y, group=sub)
        if not torch.equal(y, torch.full((5,), 3.0)):
            fails.append(f"new_group all_reduce: {y}")
    dist.barrier()
    if dist.get_backend() not in ("actorcc", backend):
        fails.append(f"get_backend: {dist.get_backend()}")
    fails += _cpu_dispatch(dist.distributed_c10d._get_default_group(), backend, "world")
    if rank in (0, 1):
        fails += _cpu_dispatch(sub, backend, "new_group")
    dist.destroy_process_group()
    return fails


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


def _tiny_model():
    import torch
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).double()


def _batch(step, world):
    """The whole batch of a step (4 rows per rank); rank r trains on rows [4r, 4r + 4)."""
    import torch
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(4 * world, 8, generator=g, dtype=torch.float64), torch.randn(4 * world, 2, generator=g,
                                                                                      dtype=torch.float64)


def _train(m, rank, world, steps, shard=True):
    import torch
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for s in range(steps):
        x, y = _batch(s, world)
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
    ref = _tiny_model()
    _train(ref, rank, world, steps, shard=False)
    want = torch.cat([p.detach().reshape(-1) for p in ref.parameters()])
    if not torch.allclose(flat, want, rtol=1e-10, atol=1e-12):
        fails.append(f"{what} params differ from the single-process reference by {(flat - want).abs().max().item()}")
    everyone = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat)
    if not all(torch.equal(everyone[0], e) for e in everyone):
        fails.append(f"{what} params differ across ranks")
    if (flat - model_params(_tiny_model)).abs().max().item() == 0:
        fails.append(f"{what} did not train (parameters unchanged)")
    return fails


def ddp(rank, world, port, steps, with_hook):
    """DDP on a tiny model: every rank's parameters after `steps` must equal each other and a
    single-process run on the whole batch (DDP averages the shards' gradients)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    _init(rank, world, port)
    m = DDP(_tiny_model())
    if with_hook:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        m.register_comm_hook(None, default_hooks.allreduce_hook)
    _train(m, rank, world, steps)
    flat = torch.cat([p.detach().reshape(-1) for p in m.module.parameters()])
    fails = _against_reference(flat, rank, world, steps, "DDP")
    dist.destroy_process_group()
    return fails


def fsdp2(rank, world, port, steps):
    """FSDP2 (fully_shard, every layer and the root) on the tiny model over a CPU device mesh:
    the parameters, gathered whole after `steps`, must equal a single-process run. The
    all-gathers and reduce-scatters are actorcc's (counted)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # torch < 2.6
        from torch.distributed._composable.fsdp import fully_shard
    _init(rank, world, port)
    pg = dist.distributed_c10d._get_default_group()
    calls = {"all_gather": 0, "reduce": 0}
    names = {"_allgather_base": "all_gather", "allgather_into_tensor_coalesced": "all_gather",
             "all_gather_single": "all_gather", "all_gather_single_coalesced": "all_gather",
             "_reduce_scatter_base": "reduce", "reduce_scatter_tensor_coalesced": "reduce",
             "reduce_scatter_single": "reduce", "reduce_scatter_single_coalesced": "reduce", "allreduce": "reduce"}
    for name, kind in names.items():
        def counted(*a, _f=getattr(pg, name), _k=kind, **k):
            calls[_k] += 1
            return _f(*a, **k)
        setattr(pg, name, counted)
    mesh = init_device_mesh("cpu", (world,))
    m = _tiny_model()
    for layer in m:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    _train(m, rank, world, steps)
    flat = torch.cat([p.full_tensor().detach().reshape(-1) for p in m.parameters()])
    fails = _against_reference(flat, rank, world, steps, "FSDP2")
    if not calls["all_gather"] or not calls["reduce"]:
        fails.append(f"FSDP2's collectives did not reach actorcc: {calls}")
    dist.destroy_process_group()
    return fails


def model_params(make):
    import torch
    return torch.cat([p.detach().reshape(-1) for p in make().parameters()])
