"""Rank-side functions for test_gpu_torch.py (each process sees one GPU)."""
import os

import actorcc

DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64"]


def vals(rank, n):
    """Rank `rank`'s input: a hash of (rank, position) in 0..4, so no two ranks and no nearby
    positions agree (a chunk stored at a wrong offset shows) and every sum is exact in every
    dtype up to 8 ranks."""
    import torch
    i = torch.arange(n, device="cuda", dtype=torch.int64)
    h = (i * 2654435761 + (rank + 1) * 97531) % (1 << 31)
    h = ((h ^ (h >> 13)) * 1274126177) % (1 << 31)
    return (h >> 7) % 5


def torch_matrix(rank, world, uid):
    import torch
    fails = []
    assert torch.cuda.device_count() == 1, os.environ.get("CUDA_VISIBLE_DEVICES")
    torch.cuda.set_device(0)
    f64 = torch.float64
    with actorcc.Communicator(uid, rank, world, timeout=60) as comm:
        if comm.backend != "cuda" or comm.device != 0:
            fails.append(f"backend {comm.backend} device {comm.device}")
        for name in DTYPES:
            dt = getattr(torch, name)
            for n in (1, 7, 4099, 1 << 20):
                x = vals(rank, n).to(dt)
                want = sum(vals(r, n) for r in range(world))
                comm.all_reduce(x)
                torch.cuda.synchronize()
                if not torch.equal(x.to(f64), want.to(dt).to(f64)):
                    fails.append(f"all_reduce {name} n={n}")
                g = comm.all_gather(vals(rank, n).to(dt))
                torch.cuda.synchronize()
                if g.device.type != "cuda" or g.numel() != n * world or g.dtype != dt:
                    fails.append(f"all_gather {name} n={n}: {g.shape} {g.device}")
                elif not all(torch.equal(g.view(world, n)[q].to(f64), vals(q, n).to(f64)) for q in range(world)):
                    fails.append(f"all_gather {name} n={n}: values")
                rs = comm.reduce_scatter(vals(rank, n * world).to(dt))
                torch.cuda.synchronize()
                want_rs = sum(vals(r, n * world) for r in range(world))[rank * n:(rank + 1) * n]
                if not torch.equal(rs.to(f64), want_rs.to(dt).to(f64)):
                    fails.append(f"reduce_scatter {name} n={n}")
                b = vals(rank, n).to(dt)
                comm.broadcast(b, root=world - 1)
                torch.cuda.synchronize()
                if not torch.equal(b.to(f64), vals(world - 1, n).to(f64)):
                    fails.append(f"broadcast {name} n={n}")
        # explicit stream, and the default = torch's current stream
        s = torch.cuda.Stream()
        total = sum(vals(r, 1024) for r in range(world)).to(torch.float32)
        with torch.cuda.stream(s):
            y = vals(rank, 1024).to(torch.float32)
            comm.all_reduce(y)              # on s (current)
        comm.all_reduce(y, stream=s)        # explicit torch stream
        comm.all_reduce(y, stream=s.cuda_stream)  # explicit int
        s.synchronize()
        if not torch.equal(y, total * world * world):
            fails.append(f"streams: {y[:4].tolist()}")
        # async: a Work with an event on the stream
        z = vals(rank, 1 << 22).to(torch.float32)
        w = comm.all_reduce(z, async_op=True)
        out = w.wait()
        want_z = sum(vals(r, 1 << 22) for r in range(world)).to(torch.float32)
        if out is not z or not w.is_completed() or not torch.equal(z, want_z):
            fails.append("async_op")
        # parameters that require grad (DLPack refuses those)
        p = torch.nn.Parameter(vals(rank, 16).to(torch.float32))
        comm.broadcast(p, root=0)
        torch.cuda.synchronize()
        if not torch.equal(p.detach(), vals(0, 16).to(torch.float32)):
            fails.append("broadcast Parameter")
        # bad arguments, before anything moves
        for what, fn in {
            "host tensor on cuda backend": lambda: comm.all_reduce(torch.ones(4)),
            "non-contiguous": lambda: comm.all_reduce(torch.ones(4, 4, device="cuda").t()),
            "dtype mix": lambda: comm.all_reduce(torch.ones(4, device="cuda"), out=torch.ones(4, device="cuda",
                                                                                             dtype=torch.float16)),
            "size": lambda: comm.all_gather(torch.ones(4, device="cuda"), out=torch.ones(5, device="cuda")),
        }.items():
            try:
                fn()
                fails.append(f"{what}: no error")
            except actorcc.InvalidArgumentError:
                pass
        # cupy, if present: the DLPack path and cupy's current stream
        try:
            import cupy
        except ImportError:
            cupy = None
        if cupy is not None:
            c = cupy.asarray(vals(rank, 1000).to(torch.float32).cpu().numpy())
            want_c = cupy.asarray(sum(vals(r, 1000) for r in range(world)).to(torch.float32).cpu().numpy())
            comm.all_reduce(c)
            cupy.cuda.get_current_stream().synchronize()
            if not bool((c == want_c).all()):
                fails.append("cupy all_reduce")
        comm.barrier()
        torch.cuda.synchronize()
    return fails


def two_groups(rank, world, uid_a, uid_b):
    import torch
    torch.cuda.set_device(0)
    a = actorcc.Communicator(uid_a, rank, world, timeout=60)
    b = actorcc.Communicator(uid_b, world - 1 - rank, world, timeout=60)
    x = vals(rank, 4096).to(torch.float32)
    a.all_reduce(x)
    b.all_reduce(x)
    torch.cuda.synchronize()
    ok = torch.equal(x, sum(vals(r, 4096) for r in range(world)).to(torch.float32) * world)
    a.close()
    b.close()
    return ok


def registered(rank, world, uid):
    """Registered torch outputs (the pipe's all-gather stores into the peers' outputs from
    32 MiB on 2 ranks): fresh inputs per trial, poisoned outputs, in place and into `out`,
    exact integer-valued float32 sums; then deregistered, the workspace path again."""
    import torch
    torch.cuda.set_device(0)
    fails = []
    n = (40 << 20) // 4 + 3  # 40 MiB + 12 bytes of float32
    with actorcc.Communicator(uid, rank, world, timeout=60) as comm:
        x = torch.empty(n, device="cuda")
        y = torch.empty(n, device="cuda")
        comm.register_buffer(x)
        comm.register_buffer(y)
        # The planner says which route a registered output takes (2 ranks: the pipe from 32 MiB).
        routes = (comm.plan("all_reduce", n * 4, registered=True), comm.plan("all_reduce", n * 4))
        if world == 2 and routes != ("twoshot_pipe", "oneshot_ll128"):
            fails.append(f"plan(all_reduce, {n * 4}) registered / not: {routes}")
        idx = torch.arange(n, device="cuda", dtype=torch.int64)

        def data(r, trial):
            return ((idx * (r + 3) + r + 7 * trial) % 1001 - 500).to(torch.float32)

        for trial in range(3):
            want = sum(data(r, trial) for r in range(world))
            x.copy_(data(rank, trial))
            y.fill_(float("nan"))
            comm.all_reduce(x, out=y)
            comm.all_reduce(x)
            torch.cuda.synchronize()
            if not torch.equal(y, want):
                fails.append(f"registered out= trial {trial}: {int((y != want).sum())} wrong")
            if not torch.equal(x, want):
                fails.append(f"registered in place trial {trial}: {int((x != want).sum())} wrong")
        comm.deregister_buffer(y)
        comm.deregister_buffer(x)
        x.copy_(data(rank, 9))
        comm.all_reduce(x)
        torch.cuda.synchronize()
        if not torch.equal(x, sum(data(r, 9) for r in range(world))):
            fails.append("after deregistration")
    return fails


def join_and_all_reduce(rank, world, uid):
    """Creates the group (join bound 60 s) and runs one all_reduce; returns the backend, the
    result's first element and the seconds the whole attempt took (or raises)."""
    import time

    import torch
    t0 = time.monotonic()
    torch.cuda.set_device(0)
    with actorcc.Communicator(uid, rank, world, timeout=30, join_timeout=60) as comm:
        x = torch.full((1024,), float(rank + 1), device="cuda")
        comm.all_reduce(x)
        torch.cuda.synchronize()
        return comm.backend, x[0].item(), time.monotonic() - t0
