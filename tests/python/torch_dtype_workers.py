"""Rank-side functions for test_torch_dtypes.py: the dtypes torch's NCCL backend takes beyond
actorcc's own (bool, float8, complex) through torch.distributed with backend "actorcc" on CPU
tensors, every result checked against a reference computed here (each returns a list of
failures)."""
import numpy as np

from torch_workers import _init

# The bool reductions torch's NCCL backend gives (SUM is logical or, PRODUCT logical and).
BOOL_OPS = {"SUM": np.logical_or, "PRODUCT": np.logical_and, "MIN": np.logical_and, "MAX": np.logical_or}


def _bools(r, case, n):
    import torch
    return torch.from_numpy(np.random.default_rng([23, r, case]).random(n) < 0.5)


def bool_collectives(rank, world, port):
    """Every collective of the backend on random bool tensors against numpy."""
    import torch
    import torch.distributed as dist
    _init(rank, world, port)
    fails = []

    def check(what, got, want):
        want = torch.as_tensor(np.asarray(want))
        if got.dtype != torch.bool or not torch.equal(got, want):
            fails.append(f"{what}: got {got.tolist()}, want {want.tolist()}")

    for case, n in enumerate((1, 7, 1001)):
        ins = [_bools(r, case, n).numpy() for r in range(world)]
        big = [_bools(r, 100 + case, n * world).numpy() for r in range(world)]
        for op, ref in BOOL_OPS.items():
            red = getattr(dist.ReduceOp, op)
            x = _bools(rank, case, n)
            dist.all_reduce(x, op=red)
            check(f"all_reduce {op} n={n}", x, ref.reduce(ins))
            x = _bools(rank, case, n)
            w = dist.all_reduce(x, op=red, async_op=True)
            w.wait()
            check(f"all_reduce async {op} n={n}", x, ref.reduce(ins))
            x = _bools(rank, case, n)
            dist.reduce(x, dst=1, op=red)
            check(f"reduce {op} n={n}", x, ref.reduce(ins) if rank == 1 else ins[rank])
            out = torch.ones(n, dtype=torch.bool)
            dist.reduce_scatter_tensor(out, _bools(rank, 100 + case, n * world), op=red)
            check(f"reduce_scatter_tensor {op} n={n}", out, ref.reduce(big)[rank * n:(rank + 1) * n])
            out = torch.ones(n, dtype=torch.bool)
            dist.reduce_scatter(out, list(_bools(rank, 100 + case, n * world).chunk(world)), op=red)
            check(f"reduce_scatter {op} n={n}", out, ref.reduce(big)[rank * n:(rank + 1) * n])
        x = [_bools(rank, case, n), _bools(rank, 200 + case, n)]
        dist.all_reduce_coalesced(x, op=dist.ReduceOp.SUM)
        check(f"all_reduce_coalesced n={n}", x[1], np.logical_or.reduce([_bools(r, 200 + case, n).numpy()
                                                                         for r in range(world)]))
        outs = [torch.zeros(n, dtype=torch.bool) for _ in range(world)]
        dist.all_gather(outs, _bools(rank, case, n))
        for r in range(world):
            check(f"all_gather n={n} from {r}", outs[r], ins[r])
        flat = torch.zeros(n * world, dtype=torch.bool)
        dist.all_gather_into_tensor(flat, _bools(rank, case, n))
        check(f"all_gather_into_tensor n={n}", flat, np.concatenate(ins))
        b = _bools(rank, case, n)
        dist.broadcast(b, src=world - 1)
        check(f"broadcast n={n}", b, ins[world - 1])
        g = [torch.zeros(n, dtype=torch.bool) for _ in range(world)] if rank == 0 else None
        dist.gather(_bools(rank, case, n), g, dst=0)
        if rank == 0:
            for r in range(world):
                check(f"gather n={n} from {r}", g[r], ins[r])
        s = torch.zeros(n, dtype=torch.bool)
        dist.scatter(s, list(_bools(1, 100 + case, n * world).chunk(world)) if rank == 1 else None, src=1)
        check(f"scatter n={n}", s, big[1][rank * n:(rank + 1) * n])
        a2a = torch.zeros(n * world, dtype=torch.bool)
        dist.all_to_all_single(a2a, _bools(rank, 100 + case, n * world))
        check(f"all_to_all_single n={n}", a2a, np.concatenate([big[r][rank * n:(rank + 1) * n] for r in range(world)]))
        outs = [torch.zeros(n, dtype=torch.bool) for _ in range(world)]
        dist.all_to_all(outs, list(_bools(rank, 100 + case, n * world).chunk(world)))
        for r in range(world):
            check(f"all_to_all n={n} from {r}", outs[r], big[r][rank * n:(rank + 1) * n])
        right, left = (rank + 1) % world, (rank - 1) % world
        got = torch.zeros(n, dtype=torch.bool)
        for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, _bools(rank, case, n), right),
                                         dist.P2POp(dist.irecv, got, left)]):
            q.wait()
        check(f"batch_isend_irecv n={n}", got, ins[left])
        got = torch.zeros(n, dtype=torch.bool)
        if rank == 0:
            dist.send(_bools(rank, case, n), 1)
        elif rank == 1:
            dist.recv(got, 0)
            check(f"send/recv n={n}", got, ins[0])
    # uneven splits (rows of 2), as MoE dispatch does
    rows = [[(s + d) % 3 for d in range(world)] for s in range(world)]  # rows[src][dst]
    src = [_bools(s, 300, 2 * sum(rows[s])).numpy().reshape(-1, 2) for s in range(world)]
    out = torch.zeros(sum(rows[s][rank] for s in range(world)), 2, dtype=torch.bool)
    dist.all_to_all_single(out, torch.from_numpy(src[rank]), [rows[s][rank] for s in range(world)], rows[rank])
    check("all_to_all_single with splits", out,
          np.concatenate([src[s][sum(rows[s][:rank]):sum(rows[s][:rank + 1])] for s in range(world)]))
    dist.destroy_process_group()
    return fails


def _values(r, case, n, dtype):
    """Rank r's `dtype` input of case `case`: small integers (exact in float8 and in their sums
    of up to 3), complex ones with both parts set."""
    import torch
    g = np.random.default_rng([29, r, case])
    if dtype.is_complex:
        return torch.complex(*(torch.from_numpy(g.integers(-8, 9, n)).float() for _ in range(2))).to(dtype)
    return torch.from_numpy(g.integers(-8, 9, n)).float().to(dtype)


def _bytes(r, case, n, dtype):
    """Any bit pattern of a 1-byte dtype (NaNs and negative zeros too): what moving collectives
    must deliver unchanged."""
    import torch
    return torch.from_numpy(np.random.default_rng([31, r, case]).integers(0, 256, n, dtype=np.uint8)).view(dtype)


def dtype_collectives(rank, world, port, cases):
    """For each (name, reductions) of `cases`, in one group: the collectives torch.distributed
    hands the backend `name` tensors in (the moving ones bit for bit; `reductions`: SUM, AVG and,
    but for complex, MIN, MAX, PRODUCT against one rounding of the exact result)."""
    import torch.distributed as dist
    _init(rank, world, port)
    fails = []
    for name, reductions in cases:
        fails += [f"{name}: {f}" for f in _dtype_collectives(rank, world, name, reductions)]
    dist.destroy_process_group()
    return fails


def _dtype_collectives(rank, world, name, reductions):
    import torch
    import torch.distributed as dist
    dtype = getattr(torch, name)
    fails = []
    one_byte = dtype.itemsize == 1

    def plain(a):  # what CPU torch can compare (it has no equal for complex32)
        return a.view(torch.uint8) if one_byte else torch.view_as_real(a).double() if a.is_complex() else a

    def same(a, b):
        return a.dtype == b.dtype and torch.equal(plain(a), plain(b))

    def check(what, got, want, close=False):
        if not (torch.allclose(plain(got), plain(want)) if close else same(got, want)):
            fails.append(f"{what}: got {plain(got).tolist()}, want {plain(want).tolist()}")

    make = _bytes if one_byte else _values
    for case, n in enumerate((1, 7, 1001)):
        ins = [make(r, case, n, dtype) for r in range(world)]
        big = [make(r, 100 + case, n * world, dtype) for r in range(world)]
        outs = [torch.zeros(n, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, ins[rank].clone())
        for r in range(world):
            check(f"all_gather n={n} from {r}", outs[r], ins[r])
        flat = torch.zeros(n * world, dtype=dtype)
        dist.all_gather_into_tensor(flat, ins[rank].clone())
        check(f"all_gather_into_tensor n={n}", flat, torch.cat(ins))
        b = ins[rank].clone()
        dist.broadcast(b, src=world - 1)
        check(f"broadcast n={n}", b, ins[world - 1])
        g = [torch.zeros(n, dtype=dtype) for _ in range(world)] if rank == 0 else None
        dist.gather(ins[rank].clone(), g, dst=0)
        if rank == 0:
            for r in range(world):
                check(f"gather n={n} from {r}", g[r], ins[r])
        s = torch.zeros(n, dtype=dtype)
        dist.scatter(s, list(big[1].clone().chunk(world)) if rank == 1 else None, src=1)
        check(f"scatter n={n}", s, big[1][rank * n:(rank + 1) * n])
        a2a = torch.zeros(n * world, dtype=dtype)
        dist.all_to_all_single(a2a, big[rank].clone())
        check(f"all_to_all_single n={n}", a2a, torch.cat([big[r][rank * n:(rank + 1) * n] for r in range(world)]))
        right, left = (rank + 1) % world, (rank - 1) % world
        got = torch.zeros(n, dtype=dtype)
        for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, ins[rank].clone(), right),
                                         dist.P2POp(dist.irecv, got, left)]):
            q.wait()
        check(f"batch_isend_irecv n={n}", got, ins[left])
        if not reductions:
            continue
        vals = [_values(r, case, n, dtype) for r in range(world)]
        bigv = [_values(r, 100 + case, n * world, dtype) for r in range(world)]
        exact = torch.complex128 if dtype.is_complex else torch.float64
        refs = {"SUM": lambda xs: sum(x.to(exact) for x in xs)}
        refs["AVG"] = lambda xs: sum(x.to(exact) for x in xs) / len(xs)
        if not dtype.is_complex:
            refs.update(MIN=lambda xs: torch.stack(xs).to(exact).amin(0),
                        MAX=lambda xs: torch.stack(xs).to(exact).amax(0),
                        PRODUCT=lambda xs: torch.stack(xs).to(exact).prod(0))
        for op, ref in refs.items():
            red = getattr(dist.ReduceOp, op)
            if not dtype.is_complex:  # torch.distributed hands all_reduce complex tensors as real already
                x = vals[rank].clone()
                dist.all_reduce(x, op=red)
                check(f"all_reduce {op} n={n}", x, ref(vals).to(dtype))
            x = vals[rank].clone()
            dist.reduce(x, dst=1, op=red)
            # a division: an ulp apart at most, which rounding to 8 bits hides (float8: exact)
            avg = op == "AVG" and not one_byte
            check(f"reduce {op} n={n}", x, ref(vals).to(dtype) if rank == 1 else vals[rank], avg)
            out = torch.zeros(n, dtype=dtype)
            dist.reduce_scatter_tensor(out, bigv[rank].clone(), op=red)
            check(f"reduce_scatter_tensor {op} n={n}", out, ref(bigv).to(dtype)[rank * n:(rank + 1) * n], avg)
            out = torch.zeros(n, dtype=dtype)
            dist.reduce_scatter(out, list(bigv[rank].clone().chunk(world)), op=red)
            check(f"reduce_scatter {op} n={n}", out, ref(bigv).to(dtype)[rank * n:(rank + 1) * n], avg)
    return fails


def refused(rank, world, ports, cases):
    """Every rank makes each call of `cases` that torch's NCCL backend refuses too: (name, call,
    op): `call` ('all_reduce', 'reduce', 'all_gather') on a `name` tensor with ReduceOp `op`,
    each in a group of its own (a refusal aborts the group), on ports[i]. Returns, per case,
    what was raised: its classes and message, or None where nothing was."""
    import torch
    import torch.distributed as dist
    out = []
    for port, (name, call, op) in zip(ports, cases):
        _init(rank, world, port)
        t = torch.zeros(4, dtype=getattr(torch, name))
        try:
            if call == "all_reduce":
                dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            elif call == "reduce":
                dist.reduce(t, dst=0, op=getattr(dist.ReduceOp, op))
            else:
                dist.all_gather_into_tensor(torch.zeros(4 * world, dtype=t.dtype), t)
            out.append(None)
        except Exception as e:  # noqa: BLE001 - the caller checks what
            out.append({"mro": [c.__name__ for c in type(e).__mro__], "msg": str(e)})
        dist.destroy_process_group()
    return out


def one_rank_refuses(rank, world, port):
    """Rank 1 all-reduces a uint16 tensor, the others a float32 one: rank 1 refuses its call,
    and the others' calls raise, naming rank 1, instead of waiting for the group's timeout
    (60 s). Returns the seconds the call took."""
    import time

    import torch
    import torch.distributed as dist
    from datetime import timedelta
    import actorcc.torch  # noqa: F401
    dist.init_process_group("actorcc", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    dist.all_reduce(torch.ones(4))  # the group's communicator formed: the refusal reaches everyone
    t0 = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4, dtype=torch.uint16 if rank == 1 else torch.float32))
    except Exception as e:  # noqa: BLE001 - the caller checks what
        e.args = (f"{e} [after {time.monotonic() - t0:.1f} s]",)
        raise
    return "not refused"
