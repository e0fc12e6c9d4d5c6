"""Rank-side functions for the multiprocess tests (run in spawned processes; each returns
a list of failure descriptions, empty when everything matched the float64 reference)."""
from __future__ import annotations

import os
import time

import numpy as np

import actorcc

try:
    import ml_dtypes  # numpy bfloat16
    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    BF16 = None

DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64"]
OPS = ["sum", "prod", "min", "max", "avg"]
SIZES = [1, 7, 1000, 4099]


def np_dtype(name):
    if name == "bfloat16":
        return BF16
    return np.dtype(name)


def available_dtypes():
    return [d for d in DTYPES if np_dtype(d) is not None]


def hashed(rank, n, seed, k):
    """n values in [0, k) from a hash of (seed, rank, position): no two ranks and no nearby
    positions agree and nothing repeats with a short period, so a chunk stored at a wrong
    offset or taken from the wrong rank gives other values."""
    i = np.arange(n, dtype=np.uint64)
    key = np.uint64((seed * 1000003 + rank + 1) * 0xBF58476D1CE4E5B9 % (1 << 64))
    with np.errstate(over="ignore"):  # modular arithmetic on purpose
        h = i * np.uint64(0x9E3779B97F4A7C15) + key
        h ^= h >> np.uint64(31)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(29)
    return (h % np.uint64(k)).astype(np.int64)


def make_input(rank, n, dtype, seed):
    """Small integers, a hash of (seed, rank, position): exact in every dtype, products of
    <= 4 ranks fit int8."""
    v = hashed(rank, n, seed, 4) if dtype == "uint8" else hashed(rank, n, seed, 7) - 3
    return v.astype(np.float64)


def reference(inputs, op, dtype):
    s = np.stack(inputs)
    if op == "sum":
        r = s.sum(0)
    elif op == "prod":
        r = s.prod(0)
    elif op == "min":
        r = s.min(0)
    elif op == "max":
        r = s.max(0)
    else:
        r = s.sum(0) / len(inputs)
        if dtype.startswith(("int", "uint")):
            r = np.trunc(r)  # integer division, as in C++
    return r


def close(got, want, dtype):
    got = np.asarray(got).astype(np.float64)
    if dtype in ("float16",):
        return np.allclose(got, want, rtol=2e-3, atol=2e-3)
    if dtype == "bfloat16":
        return np.allclose(got, want, rtol=1.6e-2, atol=1e-2)
    if dtype == "float32":
        return np.allclose(got, want, rtol=1e-6, atol=1e-6)
    if dtype == "float64":
        return np.allclose(got, want, rtol=1e-12, atol=1e-12)
    return np.array_equal(got, want)


def collective_matrix(rank, world, uid, sizes=SIZES, ops=OPS, big=True):
    """Every collective x dtype x op x size against the float64 reference."""
    fails = []
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=60) as comm:
        seed = 0
        for dtype in available_dtypes():
            dt = np_dtype(dtype)
            for n in sizes:
                seed += 1
                # all_reduce: in place and out of place
                for op in ops:
                    x = make_input(rank, n, dtype, seed).astype(dt)
                    want = reference([make_input(r, n, dtype, seed) for r in range(world)], op, dtype)
                    if op == "avg" and dtype in ("float16", "bfloat16"):
                        want = want.astype(dt).astype(np.float64)
                    out = comm.all_reduce(x.copy(), op=op)
                    if not close(out, want, dtype):
                        fails.append(f"all_reduce {dtype} {op} n={n}: {np.asarray(out)[:8]} != {want[:8]}")
                    o2 = np.empty_like(x)
                    comm.all_reduce(x, op=op, out=o2)
                    if not close(o2, want, dtype):
                        fails.append(f"all_reduce(out=) {dtype} {op} n={n}")
                    # reduce_scatter: per-rank n elements
                    xs = make_input(rank, n * world, dtype, seed).astype(dt)
                    full = reference([make_input(r, n * world, dtype, seed) for r in range(world)], op, dtype)
                    got = comm.reduce_scatter(xs, op=op)
                    if got.shape != (n,) or not close(got, full[rank * n:(rank + 1) * n], dtype):
                        fails.append(f"reduce_scatter {dtype} {op} n={n}")
                # all_gather
                x = make_input(rank, n, dtype, seed).astype(dt)
                got = comm.all_gather(x)
                want = np.concatenate([make_input(r, n, dtype, seed) for r in range(world)])
                if got.shape != (n * world,) or not close(got, want, dtype):
                    fails.append(f"all_gather {dtype} n={n}")
                # broadcast from every root
                for root in range(world):
                    x = make_input(rank, n, dtype, seed + root).astype(dt)
                    comm.broadcast(x, root=root)
                    if not close(x, make_input(root, n, dtype, seed + root), dtype):
                        fails.append(f"broadcast {dtype} root={root} n={n}")
        if big:  # large enough for the big-message algorithms
            # rank- and position-dependent (a misplaced chunk shows), exact in float32
            n = (1 << 20) + 3
            big_in = lambda r: ((np.arange(n, dtype=np.int64) * (2 * r + 3) + (np.arange(n) >> 9) + r) % 251)
            x = big_in(rank).astype(np.float32)
            comm.all_reduce(x)
            if not np.array_equal(x, sum(big_in(r) for r in range(world)).astype(np.float32)):
                fails.append("all_reduce float32 large")
            g = comm.all_gather(big_in(rank).astype(np.int32))
            if not np.array_equal(g, np.concatenate([big_in(r) for r in range(world)]).astype(np.int32)):
                fails.append("all_gather int32 large")
        comm.barrier()
    return fails


def multidim_and_inplace(rank, world, uid):
    fails = []
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=60) as comm:
        x2 = lambda r: hashed(r, 12, 1, 1000).reshape(4, 3).astype(np.float32)
        g = comm.all_gather(x2(rank))
        if g.shape != (4 * world, 3) or not np.array_equal(g, np.concatenate([x2(r) for r in range(world)])):
            fails.append(f"all_gather 2-D: {g.shape}")
        y2 = lambda r: hashed(r, 2 * world * 5, 2, 1000).reshape(2 * world, 5)
        rs = comm.reduce_scatter(y2(rank))
        if rs.shape != (2, 5) or not np.array_equal(rs, sum(y2(r) for r in range(world))[2 * rank:2 * rank + 2]):
            fails.append(f"reduce_scatter 2-D: {rs.shape}")
        # NCCL-style in place: the input is this rank's slice of the output
        part = lambda r: hashed(r, 3, 3, 1000).astype(np.float64)
        out = np.zeros(3 * world, np.float64)
        out[rank * 3:(rank + 1) * 3] = part(rank)
        comm.all_gather(out[rank * 3:(rank + 1) * 3], out=out)
        if not np.array_equal(out, np.concatenate([part(r) for r in range(world)])):
            fails.append(f"in-place all_gather: {out}")
        # 0-d and empty tensors
        s = np.array(rank + 1.0)
        comm.all_reduce(s)
        if float(s) != world * (world + 1) / 2:
            fails.append("0-d all_reduce")
        e = np.empty(0, np.float32)
        comm.all_reduce(e)
        # a DLPack-only object (no buffer protocol): the path jax/cupy take
        class DLPackOnly:
            def __init__(self, a):
                self.a = a

            def __dlpack__(self, *args, **kwargs):
                return self.a.__dlpack__(*args, **kwargs)

            def __dlpack_device__(self):
                return self.a.__dlpack_device__()

        base = hashed(rank, 16, 4, 1000).astype(np.int32)
        comm.all_reduce(DLPackOnly(base), op="max")
        if not np.array_equal(base, np.max([hashed(r, 16, 4, 1000) for r in range(world)], axis=0)):
            fails.append(f"DLPack-only all_reduce: {base}")
        # op names from other libraries' enums
        class Op:
            name = "MAX"
        z = np.array([rank], np.int32)
        comm.all_reduce(z, op=Op())
        if z[0] != world - 1:
            fails.append("enum op")
    return fails


def refused_everywhere(rank, world, uids, make_cases):
    """Rank 0 makes the bad calls of make_cases(world) (name -> fn(comm, a)), each in a group of its own
    (uids, one per case): each must raise InvalidArgumentError at once with nothing moved. The
    refusal aborts the group, so the other ranks, waiting in a barrier, must get a RemoteError
    naming rank 0 and the reason at once (the call timeout is 30 s)."""
    fails = []
    cases = make_cases(world)
    assert len(cases) == len(uids)
    for (name, fn), uid in zip(cases.items(), uids):
        comm = actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30)
        t0 = time.monotonic()
        if rank == 0:
            a = np.arange(8, dtype=np.float32)
            before = a.copy()
            try:
                fn(comm, a)
                fails.append(f"{name}: no error")
            except actorcc.InvalidArgumentError as e:
                if not isinstance(e, ValueError):
                    fails.append(f"{name}: not a ValueError")
                if time.monotonic() - t0 > 1.0:
                    fails.append(f"{name}: took {time.monotonic() - t0:.1f}s")
                if e.rank != 0 or "rank 0" not in str(e):
                    fails.append(f"{name}: does not name rank 0: rank attribute {e.rank}: {e}")
            except Exception as e:  # noqa: BLE001
                fails.append(f"{name}: wrong class {type(e).__mro__}: {e}")
            if not np.array_equal(a, before):
                fails.append(f"{name}: data moved")
        else:
            try:
                comm.barrier()
                fails.append(f"{name}: the barrier completed without rank 0")
            except actorcc.RemoteError as e:
                if e.rank != 0 or "bad argument" not in str(e):
                    fails.append(f"{name}: RemoteError does not name rank 0 and why: culprit {e.rank}: {e}")
            if time.monotonic() - t0 > 5.0:
                fails.append(f"{name}: the others learned it after {time.monotonic() - t0:.1f}s")
        # the group is aborted for everyone, rank 0 included
        try:
            comm.all_reduce(np.zeros(4, np.float32))
            fails.append(f"{name}: a later call succeeded")
        except actorcc.RemoteError:
            pass
        comm.close()
        try:
            comm.all_reduce(np.zeros(4, np.float32))
            fails.append(f"{name}: call after close: no error")
        except actorcc.Error:
            pass
        comm.close()  # idempotent
    return fails


def bad_argument_cases(world):
    """Bad calls found by each layer: the Python layer, the extension and the library (the
    reduce_scatter sizes are bad only for world > 1)."""
    cases = {
        "non-contiguous": lambda c, a: c.all_reduce(np.arange(16, dtype=np.float32)[::2]),
        "non-contiguous out": lambda c, a: c.all_reduce(a, out=np.empty(16, np.float32)[::2]),
        "dtype mix": lambda c, a: c.all_reduce(a, out=np.empty(8, np.float64)),
        "size mismatch": lambda c, a: c.all_reduce(a, out=np.empty(9, np.float32)),
        "all_gather size": lambda c, a: c.all_gather(a, out=np.empty(8 * world + 1, np.float32)),
        "reduce_scatter size": lambda c, a: c.reduce_scatter(a, out=np.empty(8, np.float32)),
        "reduce_scatter split": lambda c, a: c.reduce_scatter(np.empty(world * 2 + 1, np.float32)),
        "unsupported dtype": lambda c, a: c.all_reduce(np.zeros(4, np.complex64)),
        "bool dtype": lambda c, a: c.all_reduce(np.zeros(4, np.bool_)),
        "bad op": lambda c, a: c.all_reduce(a, op="xor"),
        "bad root": lambda c, a: c.broadcast(a, root=world),
        "read-only": lambda c, a: c.all_reduce(np.frombuffer(b"\0" * 32, np.float32)),
        "not a tensor": lambda c, a: c.all_reduce([1.0, 2.0]),
        "bad stream": lambda c, a: c.all_reduce(a, stream="s"),
    }
    if world == 1:
        del cases["reduce_scatter size"], cases["reduce_scatter split"]
    return cases


def bad_arguments_alone(rank, world, uid):
    """In a group of one nobody waits in the call: each bad call raises InvalidArgumentError
    and the group stays usable."""
    fails = []
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30) as comm:
        for name, fn in bad_argument_cases(world).items():
            try:
                fn(comm, np.arange(8, dtype=np.float32))
                fails.append(f"{name}: no error")
            except actorcc.InvalidArgumentError:
                pass
        x = np.full(5, 3, np.int32)
        comm.all_reduce(x)
        if not np.all(x == 3) or comm.aborted:
            fails.append(f"the group of one is not usable after the bad calls: {x}")
    return fails


def async_ops(rank, world, uid):
    fails = []
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=60) as comm:
        bufs = [hashed(rank, 1000, 10 + i, 1000).astype(np.float64) for i in range(8)]
        works = [comm.all_reduce(b, async_op=True) for b in bufs]
        # a sync call and host calls issued while async work is pending stay in order
        s = hashed(rank, 3, 20, 1000).astype(np.float64)
        comm.all_reduce(s)
        blobs = comm.allgather_bytes(str(rank).encode())
        for i, w in enumerate(works):
            out = w.wait()
            if out is not bufs[i] or not w.is_completed():
                fails.append(f"work {i} result/is_completed")
            if not np.array_equal(out, sum(hashed(r, 1000, 10 + i, 1000) for r in range(world))):
                fails.append(f"async all_reduce {i}: {out[:3]}")
        if not np.array_equal(s, sum(hashed(r, 3, 20, 1000) for r in range(world))):
            fails.append("sync after async")
        if blobs != [str(r).encode() for r in range(world)]:
            fails.append(f"allgather_bytes {blobs}")
        g = comm.all_gather(np.array([rank], np.int64), async_op=True).wait()
        if list(g) != list(range(world)):
            fails.append("async all_gather")
        comm.barrier(async_op=True).wait()
        # every rank has finished its barrier before rank 0's refusal below aborts the group (an
        # abort poisons the calls still in flight, as it must); the root answers this exchange
        # before it relays the abort
        comm.allgather_bytes(b"")
        # a bad argument on the async path raises at call time, not at wait(); the refusal
        # aborts the group, so every rank's next call raises naming rank 0
        if rank == 0:
            try:
                comm.all_reduce(np.arange(8.0)[::2], async_op=True)
                fails.append("async bad arg: no error")
            except actorcc.InvalidArgumentError:
                pass
        try:
            comm.barrier(async_op=True).wait()
            fails.append("async bad arg: the group still works")
        except actorcc.RemoteError as e:
            if e.rank != 0:
                fails.append(f"async bad arg: the abort names rank {e.rank}: {e}")
    return fails


def several_groups(rank, world, uid_a, uid_b, port):
    """Three groups in one process: A (ranks as given), B (ranks reversed) and C from an
    address; calls interleaved."""
    fails = []
    a = actorcc.Communicator(uid_a, rank, world, backend="cpu", timeout=60)
    b = actorcc.Communicator(actorcc.UniqueId.parse(uid_b), world - 1 - rank, world, backend="cpu", timeout=60)
    c = actorcc.Communicator.from_address("127.0.0.1", port, rank, world, backend="cpu", timeout=60, join_timeout=60)
    for i in range(3):
        x = np.array([rank], np.int64)
        a.broadcast(x, root=0)
        y = np.array([rank], np.int64)
        b.broadcast(y, root=0)  # b's rank 0 is our world-1
        z = np.array([1], np.int64)
        c.all_reduce(z)
        if x[0] != 0 or y[0] != world - 1 or z[0] != world:
            fails.append(f"iteration {i}: {x} {y} {z}")
    if a.rank != rank or b.rank != world - 1 - rank or c.rank != rank:
        fails.append("ranks")
    for g in (a, b, c):
        g.close()
    return fails


def info(rank, world, uid):
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30) as comm:
        return {"backend": comm.backend, "device": comm.device, "peers": comm.peers,
                "num_nodes": comm.num_nodes, "pid": os.getpid()}


def stall_then_call(rank, world, uid, missing_rank, sleep_s, timeout):
    """Every rank but `missing_rank` all-reduces; missing_rank sleeps; returns the elapsed
    time of the failed call (the error propagates to the parent). `timeout`: seconds, or a
    list of them by rank."""
    if isinstance(timeout, (list, tuple)):
        timeout = timeout[rank]
    comm = actorcc.Communicator(uid, rank, world, backend="cpu", timeout=timeout)
    if rank == missing_rank:
        time.sleep(sleep_s)
        return "slept"
    t0 = time.monotonic()
    try:
        comm.all_reduce(np.ones(1024, np.float32))
    except actorcc.Error as e:
        e.args = (f"{e} [after {time.monotonic() - t0:.2f}s]",)
        raise
    return "no error"


def die_in_call(rank, world, uid, victim, timeout):
    """The victim exits abruptly while the others are inside an all_reduce."""
    comm = actorcc.Communicator(uid, rank, world, backend="cpu", timeout=timeout)
    comm.all_reduce(np.ones(4, np.float32))  # everyone is up
    if rank == victim:
        time.sleep(0.5)
        os._exit(3)
    t0 = time.monotonic()
    try:
        comm.all_reduce(np.ones(1 << 16, np.float32))
    except actorcc.Error as e:
        e.args = (f"{e} [after {time.monotonic() - t0:.2f}s]",)
        raise
    return "no error"


def staggered_join(rank, world, uid, stagger_s, join_timeout):
    time.sleep(rank * stagger_s)
    with actorcc.Communicator(uid, rank, world, backend="cpu", join_timeout=join_timeout) as comm:
        x = np.array([1], np.int32)
        comm.all_reduce(x)
        return int(x[0])


def abort_other(rank, world, uid):
    comm = actorcc.Communicator(uid, rank, world, backend="cpu", timeout=60)
    comm.host_barrier()
    if rank == 1:
        comm.abort("test abort")
        return "aborted"
    time.sleep(0.2)
    comm.all_reduce(np.ones(8, np.float32))
    return "no error"



def raise_in_with(rank, world, uids, culprit):
    """One group per uid, in turn: `culprit` raises a plain exception inside its `with` block
    while the others keep all-reducing. Returns, per group, what this rank got: (exception
    type, its .rank, message). The others must get a RemoteError naming `culprit`, never a
    rank that only left its own block on that RemoteError."""
    got = []
    for uid in uids:
        try:
            with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30) as comm:
                x = np.ones(1000, np.float32)
                comm.all_reduce(x)
                if rank == culprit:
                    raise ValueError("raised inside the with block")
                for _ in range(3):
                    comm.all_reduce(x)
            got.append(("no error", None, ""))
        except Exception as e:  # noqa: BLE001 - what each rank saw is the result
            got.append((type(e).__name__, getattr(e, "rank", None), str(e)))
    return got


def host_root(conn):
    """A process that only hosts a group's root (UniqueId.create), as a driver does."""
    conn.send(str(actorcc.UniqueId.create("127.0.0.1")))
    time.sleep(600)


def outlive_root(rank, world, uid, root_pid):
    """After the group formed, rank 0 kills the process hosting the root while every rank
    keeps all-reducing: returns (error type, message, seconds from the barrier to the error,
    seconds close() took then, (sum, world size) of an all-reduce of rank + 1 in the group that
    comm.shrink(exclude=[]) made afterwards, as the error advises)."""
    comm = actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30)
    x = np.ones(256, np.float32)
    comm.all_reduce(x)
    t0 = time.monotonic()
    try:
        comm.host_barrier()  # rank 0 may kill the root before the others are out of it
        if rank == 0:
            os.kill(root_pid, 9)
        while time.monotonic() - t0 < 20:
            comm.all_reduce(x)
    except actorcc.Error as e:
        got = type(e).__name__, str(e), time.monotonic() - t0
        with comm.shrink([], join_timeout=20) as new:
            y = np.full(16, rank + 1, np.float32)
            new.all_reduce(y)
        t1 = time.monotonic()
        comm.close()
        return got + (time.monotonic() - t1, (float(y[0]), new.world_size))
    return "no error", "", time.monotonic() - t0, 0.0, None
