"""Rank-side functions for test_gpu_p2p.py: all_to_all, gather, scatter, reduce, send/recv,
batches and all_to_all_v on torch CUDA tensors (the NVLink path's push kernels, or NCCL), and
transfers whose two ends disagree. Random inputs from (seed, rank, case), poisoned outputs; each
returns a list of failures."""
import numpy as np

import actorcc
from p2p_workers import POISON, values

DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64"]
SIZES = [1, 7, 4099, (1 << 18) + 3]
SHARED_SIZES = [1, 7, 4099, 65539]  # ranks sharing a GPU wait for a context switch per step


def gpu_p2p(rank, world, uid, seed, sizes=SIZES):
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
                case += 1
                fails += _p2p_cases(comm, rank, world, seed, case, n, name, t, poisoned, same)
        fails += _captured_batch(comm, rank, world, t, poisoned, same)
        torch.cuda.synchronize()
    return fails


def _captured_batch(comm, rank, world, t, poisoned, same):
    """A ring batch captured in a CUDA graph and replayed with fresh inputs: the per-pair
    counters live in device memory, so replays stay in step."""
    import torch
    n = 4099
    right, left = (rank + 1) % world, (rank - 1) % world
    src, dst = t(rank, 950, n, "float32"), poisoned(n, "float32")
    comm.batch_send_recv([("send", src, right), ("recv", dst, left)])  # eager first (torch's advice)
    torch.cuda.synchronize()
    fails = [] if same(dst, t(left, 950, n, "float32")) else ["eager batch before the capture"]
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        comm.batch_send_recv([("send", src, right), ("recv", dst, left)])
    for rep in range(3):
        src.copy_(t(rank, 951 + rep, n, "float32"))
        dst.fill_(POISON)
        g.replay()
        torch.cuda.synchronize()
        if not same(dst, t(left, 951 + rep, n, "float32")):
            fails.append(f"captured batch, replay {rep}")
    return fails


def _p2p_cases(comm, rank, world, seed, case, n, name, t, poisoned, same):
    """send/recv in pairs (an odd last rank sits out), a batch (a message to and from every rank,
    itself included, issued in another order on odd ranks), all_to_all_v with random counts
    (some zero)."""
    import torch
    fails = []
    partner = rank ^ 1
    if partner < world:
        got = poisoned(n, name)
        for leg in range(2):
            if rank % 2 == leg:
                comm.send(t(rank, case, n, name), partner)
            else:
                comm.recv(got, partner)
        if not same(got, t(partner, case, n, name)):
            fails.append(f"send/recv {name} n={n} from {partner}")
    ops, want = [], {}
    for k in range(world):
        ops.append(("send", t(rank, case * 100 + k, n + k, name), k))
        want[k] = poisoned(n + rank, name)
        ops.append(("recv", want[k], k))
    comm.batch_send_recv(ops[::-1] if rank % 2 else ops)
    for k, buf in want.items():
        if not same(buf, t(k, case * 100 + rank, n + rank, name)):
            fails.append(f"batch_send_recv {name} n={n} from {k}")
    cnt = np.random.default_rng([seed, case]).integers(0, n + 2, (world, world))
    cnt[np.random.default_rng([seed, case, 1]).random((world, world)) < 0.2] = 0
    x = t(rank, case, int(cnt[rank].sum()), name)
    out = poisoned(int(cnt[:, rank].sum()), name)
    comm.all_to_all_v(x, out, cnt[rank].tolist(), cnt[:, rank].tolist())
    parts = [t(r, case, int(cnt[r].sum()), name)[int(cnt[r, :rank].sum()):][:int(cnt[r, rank])] for r in range(world)]
    if not same(out, torch.cat(parts)):
        fails.append(f"all_to_all_v {name} n={n}")
    return fails


def gpu_p2p_mismatch(rank, world, uid, what):
    """A send from rank 0 whose receive on rank 1 disagrees (`what`: "count" or "dtype", same
    bytes): both ranks raise an error naming the other, nothing is written into rank 1's buffer. Returns (error text or None, whether rank 1's buffer stayed
    poisoned)."""
    import torch
    torch.cuda.set_device(0)
    comm = actorcc.Communicator(uid, rank, world, timeout=20)
    got = torch.full((12,), POISON, dtype=torch.float32, device="cuda")
    err = None
    try:
        if rank == 0:
            x = torch.ones(10, dtype=torch.int32 if what == "dtype" else torch.float32, device="cuda")
            comm.send(x if what != "count" else x[:9], 1)
        else:
            comm.recv(got[:10], 0)
        torch.cuda.synchronize()
        comm.barrier()  # the kernel's record surfaces here at the latest
        torch.cuda.synchronize()
        comm.barrier()
    except actorcc.Error as e:
        err = str(e)
    untouched = bool((got.cpu() == POISON).all())
    try:
        comm.close()
    except actorcc.Error:
        pass
    return err, untouched
