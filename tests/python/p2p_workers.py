"""Rank-side functions for the point-to-point tests (send/recv, batches, all_to_all(_v),
reduce, gather, scatter): each returns a list of failure descriptions, empty when every
result matched. Inputs are random, drawn from (seed, rank, case), so every rank can rebuild
every other rank's input; outputs start poisoned."""
from __future__ import annotations

import numpy as np

import actorcc
from workers import OPS, available_dtypes, close, np_dtype, reference

SIZES = [0, 1, 7, 1001, 70001]
POISON = 77


def values(seed, rank, case, n, dtype, op="sum"):
    """Small integers (exact in every dtype; products over 4 ranks fit int8)."""
    rng = np.random.default_rng([seed, rank, case])
    if op == "prod":
        v = rng.choice(np.array([1, 2] if dtype == "uint8" else [-2, -1, 1, 2]), n)
    elif dtype == "uint8":
        v = rng.integers(0, 8, n)
    else:
        v = rng.integers(-8, 9, n)
    return v.astype(np.float64)


def poisoned(n, dt):
    return np.full(n, POISON, np.float64).astype(dt)


def p2p_matrix(rank, world, uid, seed, sizes=SIZES, torch_too=False):
    fails = []
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=60) as comm:
        case = 0
        for dtype in available_dtypes():
            dt = np_dtype(dtype)
            for n in sizes:
                case += 1
                # send/recv in pairs (2i, 2i+1), there and back; an odd last rank sits out
                partner = rank ^ 1
                if partner < world:
                    mine = values(seed, rank, case, n, dtype).astype(dt)
                    got = poisoned(n, dt)
                    for leg in range(2):
                        if rank % 2 == leg:
                            comm.send(mine, partner)
                        else:
                            comm.recv(got, partner)
                    if not close(got, values(seed, partner, case, n, dtype), dtype):
                        fails.append(f"send/recv {dtype} n={n} from {partner}")
                # a batch: one message to every other rank (every ring at once), a copy to self
                case += 1
                ops, want = [], {}
                for k in range(world):
                    ops.append(actorcc.P2POp("send", values(seed, rank, case * 100 + k, n, dtype).astype(dt), k))
                    buf = poisoned(n, dt)
                    ops.append(("recv", buf, k))
                    want[k] = buf
                comm.batch_send_recv(ops[::-1] if rank % 2 else ops)
                for k, buf in want.items():
                    if not close(buf, values(seed, k, case * 100 + rank, n, dtype), dtype):
                        fails.append(f"batch_send_recv {dtype} n={n} from {k}")
                # all_to_all: output block r is block `rank` of rank r's input
                case += 1
                x = values(seed, rank, case, n * world, dtype).astype(dt)
                out = poisoned(n * world, dt)
                comm.all_to_all(x, out)
                want = np.concatenate([values(seed, r, case, n * world, dtype)[rank * n:(rank + 1) * n]
                                       for r in range(world)])
                if not close(out, want, dtype):
                    fails.append(f"all_to_all {dtype} n={n}")
                # all_to_all_v: counts random per (sender, receiver), some zero
                case += 1
                cnt = np.random.default_rng([seed, case]).integers(0, n + 2, (world, world))
                cnt[np.random.default_rng([seed, case, 1]).random((world, world)) < 0.2] = 0
                x = values(seed, rank, case, int(cnt[rank].sum()), dtype).astype(dt)
                out = poisoned(int(cnt[:, rank].sum()), dt)
                comm.all_to_all_v(x, out, cnt[rank].tolist(), cnt[:, rank].tolist())
                parts = []
                for r in range(world):
                    src = values(seed, r, case, int(cnt[r].sum()), dtype)
                    off = int(cnt[r, :rank].sum())
                    parts.append(src[off:off + int(cnt[r, rank])])
                if not close(out, np.concatenate(parts), dtype):
                    fails.append(f"all_to_all_v {dtype} n={n}")
                # gather / scatter / reduce with a root that moves
                for root in range(world):
                    case += 1
                    x = values(seed, rank, case, n, dtype).astype(dt)
                    g = comm.gather(x, root=root)
                    if rank == root:
                        want = np.concatenate([values(seed, r, case, n, dtype) for r in range(world)])
                        if g.shape != (n * world,) or not close(g, want, dtype):
                            fails.append(f"gather {dtype} n={n} root={root}")
                    elif g is not None:
                        fails.append(f"gather returned {type(g).__name__} on non-root {rank}")
                    src = values(seed, root, case, n * world, dtype).astype(dt)
                    out = poisoned(n, dt)
                    comm.scatter(src if rank == root else None, out, root=root)
                    if not close(out, values(seed, root, case, n * world, dtype)[rank * n:(rank + 1) * n], dtype):
                        fails.append(f"scatter {dtype} n={n} root={root}")
                for op in OPS:
                    case += 1
                    root = case % world
                    x = values(seed, rank, case, n, dtype, op).astype(dt)
                    before = x.copy()
                    comm.reduce(x, root=root, op=op)
                    if rank == root:
                        want = reference([values(seed, r, case, n, dtype, op) for r in range(world)], op, dtype)
                        if op == "avg" and dtype in ("float16", "bfloat16"):
                            want = want.astype(dt).astype(np.float64)
                        if not close(x, want, dtype):
                            fails.append(f"reduce {dtype} {op} n={n} root={root}: {x[:6]} != {want[:6]}")
                    elif not np.array_equal(x.view(np.uint8), before.view(np.uint8)):
                        fails.append(f"reduce {dtype} {op}: non-root {rank}'s tensor changed")
        if torch_too:
            fails += _torch_calls(comm, rank, world, seed)
        comm.barrier()
    return fails


def _torch_calls(comm, rank, world, seed):
    """The same calls on torch CPU tensors (every dtype torch and actorcc share)."""
    import torch
    fails = []
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int32,
               torch.int64):
        n = 1001
        def v(r, c, m):
            return torch.from_numpy(values(seed, r, c, m, "uint8")).to(dt)
        x = v(rank, 1, n * world)
        out = torch.full((n * world,), POISON, dtype=dt)
        comm.all_to_all(x, out)
        want = torch.cat([v(r, 1, n * world)[rank * n:(rank + 1) * n] for r in range(world)])
        if not torch.equal(out, want):
            fails.append(f"torch all_to_all {dt}")
        peer_to, peer_from = (rank + 1) % world, (rank - 1) % world
        got = torch.full((n,), POISON, dtype=dt)
        comm.batch_send_recv([actorcc.P2POp("isend", v(rank, 2, n), peer_to), actorcc.P2POp("irecv", got, peer_from)])
        if not torch.equal(got, v(peer_from, 2, n)):
            fails.append(f"torch batch ring {dt}")
        t = v(rank, 3, n)
        comm.reduce(t, root=world - 1)
        if rank == world - 1 and not torch.equal(t, sum(v(r, 3, n).double() for r in range(world)).to(dt)):
            fails.append(f"torch reduce {dt}")
        g = comm.gather(v(rank, 4, n), root=0)
        if rank == 0 and not torch.equal(g, torch.cat([v(r, 4, n) for r in range(world)])):
            fails.append(f"torch gather {dt}")
        s = torch.full((n,), POISON, dtype=dt)
        comm.scatter(v(0, 5, n * world) if rank == 0 else None, s, root=0)
        if not torch.equal(s, v(0, 5, n * world)[rank * n:(rank + 1) * n]):
            fails.append(f"torch scatter {dt}")
    return fails


def async_calls(rank, world, uid):
    """async_op=True returns a Work; calls still run in issue order with the blocking ones."""
    fails = []
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=60) as comm:
        x = np.arange(world * 5, dtype=np.int32) + 100 * rank
        out = np.full(world * 5, -1, np.int32)
        w1 = comm.all_to_all(x, out, async_op=True)
        red = lambda r: np.arange(5, dtype=np.int64) * 7 + 1000 * r + 1  # rank- and position-dependent
        t = red(rank)
        w2 = comm.reduce(t, root=0, async_op=True)
        msg = lambda r: np.arange(3, dtype=np.float32) * 3 + 10 * r
        got = np.zeros(3, np.float32)
        w3 = comm.batch_send_recv([("send", msg(rank), (rank + 1) % world),
                                   ("recv", got, (rank - 1) % world)], async_op=True)
        if w1.wait() is not out or w2.wait() is not t:
            fails.append("Work.wait() does not return the result tensor")
        w3.wait()
        want = np.concatenate([np.arange(rank * 5, rank * 5 + 5) + 100 * r for r in range(world)])
        if not np.array_equal(out, want):
            fails.append(f"async all_to_all: {out}")
        if rank == 0 and not np.array_equal(t, sum(red(r) for r in range(world))):
            fails.append(f"async reduce: {t}")
        if not np.array_equal(got, msg((rank - 1) % world)):
            fails.append(f"async batch: {got}")
    return fails


def bad_argument_cases(world):
    """Bad point-to-point and rooted calls, for workers.refused_everywhere."""
    z = np.zeros
    return {
        "send to self": lambda c, a: c.send(a, 0),
        "peer out of range": lambda c, a: c.send(a, world),
        "negative peer": lambda c, a: c.recv(a, -1),
        "all_to_all split": lambda c, a: c.all_to_all(z(world * 2 + 1, np.float32), z(world * 2 + 1, np.float32)),
        "all_to_all out size": lambda c, a: c.all_to_all(z(world * 2, np.float32), z(world * 2 + 1, np.float32)),
        "all_to_all in place": lambda c, a: c.all_to_all(a, a),
        "all_to_all_v counts length": lambda c, a: c.all_to_all_v(a, a.copy(), [8], [8]),
        "all_to_all_v sum": lambda c, a: c.all_to_all_v(a, a.copy(), [1] * world, [8] + [0] * (world - 1)),
        "all_to_all_v negative": lambda c, a: c.all_to_all_v(a, a.copy(), [-1] + [0] * (world - 1), [0] * world),
        "gather out size": lambda c, a: c.gather(a, out=z(8 * world + 1, np.float32), root=0),
        "gather dtype": lambda c, a: c.gather(a, out=z(8 * world, np.float64), root=0),
        "scatter input size": lambda c, a: c.scatter(z(8, np.float32), z(8, np.float32), root=0),
        "scatter no input on root": lambda c, a: c.scatter(None, z(8, np.float32), root=0),
        "scatter no out": lambda c, a: c.scatter(z(8 * world, np.float32), None, root=0),
        "reduce root": lambda c, a: c.reduce(a, root=world),
        "reduce op": lambda c, a: c.reduce(a, op="xor"),
        "batch peer": lambda c, a: c.batch_send_recv([("send", a, world)]),
        "batch kind": lambda c, a: c.batch_send_recv([("bcast", a, 1)]),
        "batch self unpaired": lambda c, a: c.batch_send_recv([("send", a, 0)]),
        "recv read-only": lambda c, a: c.recv(np.frombuffer(b"\0" * 32, np.float32), 1),
    }


def mismatched_recv(rank, world, uid):
    """Rank 0 sends 10 float32 to rank 1, which expects 12: both raise, naming both ranks."""
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=20) as comm:
        if rank == 0:
            comm.send(np.zeros(10, np.float32), 1)
        elif rank == 1:
            comm.recv(np.zeros(12, np.float32), 0)
        else:
            comm.barrier()
    return "completed"


def mismatched_all_to_all_v_checked(rank, world, uid):
    """Checked mode: rank 0 expects one element more from rank 1 than rank 1 sends it. Every
    rank refuses the call before any data moves, naming both ranks; a refusal aborts the group
    (docs/reliability.md), so a later call raises RemoteError instead of running."""
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=20, checked=True) as comm:
        send = [2] * world
        recv = [2] * world
        if rank == 0:
            recv[1] = 3
        x = np.arange(sum(send), dtype=np.float32)
        err = None
        try:
            comm.all_to_all_v(x, np.zeros(sum(recv), np.float32), send, recv)
        except actorcc.InvalidArgumentError as e:
            err = str(e)
        try:
            comm.all_to_all_v(x, np.zeros(2 * world, np.float32), [2] * world, [2] * world)
            return err, False
        except actorcc.RemoteError:
            return err, True


def many_senders(rank, world, uid, seed):
    """More senders than a receiver's inbox has channels (8): every other rank sends rank 0 two
    messages of several chunks in one batch, which rank 0 receives in two batches (the second
    in reverse peer order); then an all_to_all over every pair. Returns the mismatches."""
    fails = []
    n = 70000  # float32: 280 KB, three chunks of 128 KiB
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=60) as comm:
        if rank == 0:
            for leg, peers in enumerate([range(1, world), range(world - 1, 0, -1)]):
                bufs = {p: poisoned(n, np.float32) for p in peers}
                comm.batch_send_recv([("recv", bufs[p], p) for p in peers])
                for p in peers:
                    if not close(bufs[p], values(seed, p, leg, n, "float32"), "float32"):
                        fails.append(f"message {leg} from rank {p}")
        else:
            comm.batch_send_recv([("send", values(seed, rank, leg, n, "float32").astype(np.float32), 0)
                                  for leg in range(2)])
        m = 5000
        src = np.concatenate([values(seed, rank, 100 + k, m, "float32") for k in range(world)]).astype(np.float32)
        got = poisoned(m * world, np.float32)
        comm.all_to_all(src, got)
        for k in range(world):
            if not close(got[k * m:(k + 1) * m], values(seed, k, 100 + rank, m, "float32"), "float32"):
                fails.append(f"all_to_all block from rank {k}")
    return fails
