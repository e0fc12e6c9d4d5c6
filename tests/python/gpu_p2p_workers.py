"""Rank-side functions for test_gpu_p2p.py: all_to_all, gather, scatter and reduce on torch
CUDA tensors (the NVLink path's push kernels, or NCCL), and on the NCCL path send/recv,
batches and all_to_all_v too. Random inputs from (seed, rank, case), poisoned outputs; each
returns a list of failures."""
import numpy as np

import actorcc
from p2p_workers import POISON, values

DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64"]
SIZES = [1, 7, 4099, (1 << 18) + 3]
SHARED_SIZES = [1, 7, 4099, 65539]  # ranks sharing a GPU wait for a context switch per step


def gpu_p2p(rank, world, uid, seed, p2p_too, sizes=SIZES):
    import torch
    fails = []
    torch.cuda.set_device(0)  # each process sees its GPU as device 0
    with actorcc.Communicator(uid, rank, world, timeout=120) as comm:
        if comm.backend != "cuda":
            return [f"backend {comm.backend}"]
        case = 0

        def t(r, c, n, name, op="sum"):
            return torch.from_numpy(values(seed, r, c, n, name, op)).to(getattr(torch, name)).cuda()

        def poisoned(n, name):
            return torch.full((n,), POISON, dtype=getattr(torch, name), device="cuda")

        def same(a, b):
            return torch.equal(a.cpu().double(), b.cpu().double())

        for name in DTYPES:
            for n in sizes:
                case += 1
                x = t(rank, case, n * world, name)
                out = poisoned(n * world, name)
                comm.all_to_all(x, out)
                want = torch.cat([t(r, case, n * world, name)[rank * n:(rank + 1) * n] for r in range(world)])
                if not same(out, want):
                    fails.append(f"all_to_all {name} n={n}")
                for root in range(world):
                    case += 1
                    g = comm.gather(t(rank, case, n, name), root=root)
                    if rank == root and not same(g, torch.cat([t(r, case, n, name) for r in range(world)])):
                        fails.append(f"gather {name} n={n} root={root}")
                    s = poisoned(n, name)
                    comm.scatter(t(root, case, n * world, name) if rank == root else None, s, root=root)
                    if not same(s, t(root, case, n * world, name)[rank * n:(rank + 1) * n]):
                        fails.append(f"scatter {name} n={n} root={root}")
                for op in ("sum", "max", "prod"):
                    case += 1
                    root = case % world
                    x = t(rank, case, n, name, op)
                    before = x.clone()
                    comm.reduce(x, root=root, op=op)
                    ins = torch.stack([t(r, case, n, name, op).cpu().double() for r in range(world)])
                    want = ins.sum(0) if op == "sum" else ins.amax(0) if op == "max" else ins.prod(0)
                    if rank == root and not same(x, want.to(getattr(torch, name))):
                        fails.append(f"reduce {name} {op} n={n} root={root}")
                    if rank != root and not torch.equal(x, before):
                        fails.append(f"reduce {name} {op}: non-root tensor changed")
        if p2p_too:
            n = 100003
            right, left = (rank + 1) % world, (rank - 1) % world
            got = poisoned(n, "float32")
            comm.batch_send_recv([("send", t(rank, 900, n, "float32"), right), ("recv", got, left)])
            if not same(got, t(left, 900, n, "float32")):
                fails.append("batch ring")
            if world % 2 == 0:
                got = poisoned(n, "bfloat16")
                for leg in range(2):
                    if rank % 2 == leg:
                        comm.send(t(rank, 901, n, "bfloat16"), rank ^ 1)
                    else:
                        comm.recv(got, rank ^ 1)
                if not same(got, t(rank ^ 1, 901, n, "bfloat16")):
                    fails.append("send/recv")
            cnt = np.random.default_rng([seed, 902]).integers(0, 5000, (world, world))
            x = t(rank, 903, int(cnt[rank].sum()), "int32")
            out = poisoned(int(cnt[:, rank].sum()), "int32")
            comm.all_to_all_v(x, out, cnt[rank].tolist(), cnt[:, rank].tolist())
            parts = [t(r, 903, int(cnt[r].sum()), "int32")[int(cnt[r, :rank].sum()):][:int(cnt[r, rank])]
                     for r in range(world)]
            if not same(out, torch.cat(parts)):
                fails.append("all_to_all_v")
        else:
            # The NVLink path refuses what it cannot carry yet, clearly and on every rank alike.
            try:
                comm.send(t(rank, 0, 4, "float32"), (rank + 1) % world)
                fails.append("send on the NVLink path did not raise")
            except actorcc.UnsupportedError as e:
                if "not available on the CUDA backend" not in str(e):
                    fails.append(f"send: unclear error: {e}")
        torch.cuda.synchronize()
    return fails
