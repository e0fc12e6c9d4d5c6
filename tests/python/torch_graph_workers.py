"""Rank-side function of test_torch_graphs.py: torch.distributed calls on backend "actorcc"
captured in CUDA graphs (torch.cuda.graph) and replayed many times with fresh inputs."""
import os


def _inputs(torch, r, i, n, dt, dev):
    """Rank r's input of replay i: n small integers (exact in every dtype and sum), different
    per rank, per replay and per position."""
    x = torch.arange(n, device=dev, dtype=torch.int64)
    return ((x * (r + 2) + i * 7 + r * 3) % 17 - 8).to(dt)


def graphs(rank, world, port, replays):
    """Each call captured in its own graph (after an eager warm-up, as torch.cuda.graph asks),
    then replayed `replays` times: before each replay fresh inputs are copied into the static
    input and the output poisoned; after it the output is compared with a float64 reference on
    the device (mismatches counted there, no host sync per replay), and a sample of replays
    (the first, every 100th, the last) is compared on the host too. Returns the failures."""
    import torch
    import torch.distributed as dist

    import actorcc.torch  # noqa: F401  registers the backend

    torch.cuda.set_device(int(os.environ.get("LOCAL_DEVICE", "0")))
    dev = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("actorcc", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    fails = []
    n = 1003  # odd: not a multiple of any vector width
    right, left = (rank + 1) % world, (rank - 1) % world

    def inp(r, i, m, dt):
        return _inputs(torch, r, i, m, dt, dev)

    def total(i, m, dt):
        return sum(inp(r, i, m, torch.float64) for r in range(world)).to(dt)

    side = torch.cuda.Stream()

    # name: (dtype, input size, output size or None for in place, call, reference(i))
    def all_reduce_sync(x, out):
        dist.all_reduce(x)

    def all_reduce_async_side_stream(x, out):
        # issued on a forked stream, waited on from the capturing one: wait() must be a stream
        # dependency captured into the graph (a host sync would end the capture with an error)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            w = dist.all_reduce(x, op=dist.ReduceOp.MAX, async_op=True)
        w.wait()

    def all_gather(x, out):
        dist.all_gather_into_tensor(out, x)

    def reduce_scatter(x, out):
        dist.reduce_scatter_tensor(out, x)

    def broadcast(x, out):
        w = dist.broadcast(x, src=world - 1, async_op=True)
        w.wait()

    def p2p_ring(x, out):
        for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, right), dist.P2POp(dist.irecv, out, left)]):
            w.wait()

    cases = {
        "all_reduce": (torch.float32, n, None, all_reduce_sync, lambda i: total(i, n, torch.float32)),
        "all_reduce_async_max_side_stream": (
            torch.bfloat16, n, None, all_reduce_async_side_stream,
            lambda i: torch.stack([inp(r, i, n, torch.bfloat16) for r in range(world)]).amax(0)),
        "all_gather_into_tensor": (
            torch.float16, n, n * world, all_gather,
            lambda i: torch.cat([inp(r, i, n, torch.float16) for r in range(world)])),
        "reduce_scatter_tensor": (
            torch.int32, n * world, n, reduce_scatter,
            lambda i: total(i, n * world, torch.int32)[rank * n:(rank + 1) * n]),
        "broadcast": (torch.int64, n, None, broadcast, lambda i: inp(world - 1, i, n, torch.int64)),
        "batch_isend_irecv": (torch.float32, n, n, p2p_ring, lambda i: inp(left, i, n, torch.float32)),
    }
    for name, (dt, n_in, n_out, call, want) in cases.items():
        x = torch.zeros(n_in, dtype=dt, device=dev)
        out = torch.zeros(n_out, dtype=dt, device=dev) if n_out else None
        result = out if out is not None else x
        try:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # eager warm-up, off the default stream
                x.copy_(inp(rank, -1, n_in, dt))
                call(x, out)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                call(x, out)
        except Exception as e:  # noqa: BLE001 - reported, the next case still runs
            fails.append(f"{name}: capture failed: {type(e).__name__}: {e}")
            continue
        bad = torch.zeros((), dtype=torch.int64, device=dev)
        for i in range(replays):
            x.copy_(inp(rank, i, n_in, dt))
            if out is not None:
                out.fill_(99)
            g.replay()
            ref = want(i)
            bad += (result != ref).sum()
            if i == 0 or i % 100 == 0 or i == replays - 1:
                if not torch.equal(result, ref):
                    fails.append(f"{name}: replay {i}: {result[:6].tolist()} != {ref[:6].tolist()}")
        torch.cuda.synchronize()
        if int(bad.item()):
            fails.append(f"{name}: {int(bad.item())} wrong elements over {replays} replays")
        del g
    dist.barrier()
    dist.destroy_process_group()
    return fails
