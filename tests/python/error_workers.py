"""Rank-side functions of test_call_errors.py (spawned processes, CPU backend): ranks that
disagree on a call, outputs that overlap their input, check() and Work.wait()."""
from __future__ import annotations

import time

import numpy as np

import actorcc

# name -> (what the odd rank calls, what the others call); each a (method, kwargs-maker) pair.
# Sizes span the one-shot and the two-shot all-reduce (64 KiB) and several shm rounds.
MISMATCHES = {
    "count": (("all_reduce", 2048, "float32", {"op": "sum"}), ("all_reduce", 4096, "float32", {"op": "sum"})),
    "count-large": (("all_reduce", 1 << 18, "float32", {}), ("all_reduce", (1 << 18) + 1, "float32", {})),
    "dtype": (("all_reduce", 512, "int32", {}), ("all_reduce", 512, "float32", {})),
    "op": (("all_reduce", 512, "float32", {"op": "max"}), ("all_reduce", 512, "float32", {"op": "sum"})),
    "root": (("broadcast", 100, "float64", {"root": 1}), ("broadcast", 100, "float64", {"root": 0})),
    "collective": (("all_gather", 64, "float32", {}), ("all_reduce", 64, "float32", {})),
    "barrier": (("barrier", 0, None, {}), ("reduce_scatter", 64, "float32", {})),
    # A call that moves nothing still meets its peers (else the odd rank would run ahead).
    "count-zero": (("all_reduce", 0, "float32", {}), ("all_reduce", 512, "float32", {})),
    "count-zero-others": (("broadcast", 300, "int64", {"root": 0}), ("broadcast", 0, "int64", {"root": 0})),
}


def _call(comm, world, spec):
    name, n, dtype, kw = spec
    if name == "barrier":
        return comm.barrier()
    x = np.ones(n * (world if name == "reduce_scatter" else 1), dtype)
    return getattr(comm, name)(x, **kw)


def mismatch(rank, world, uid, case, odd):
    """Two matching calls, then rank `odd` calls something else: every rank must raise, each
    message naming both calls. Returns (seconds to the error, type, message, whether it was
    raised by the mismatched call itself)."""
    theirs, ours = MISMATCHES[case]
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30) as comm:
        comm.host_barrier()
        t0 = time.monotonic()
        try:
            # The matching calls complete on every rank, also on one still finishing the
            # last of them when a faster rank's next call finds the mismatch.
            for _ in range(2):
                _call(comm, world, ours)
            _call(comm, world, theirs if rank == odd else ours)
        except actorcc.Error as e:
            return time.monotonic() - t0, type(e).__name__, str(e), True
        # Across nodes, a rank whose partners in this call all agreed with it may complete it
        # (its data came from ranks that made its call); the group is aborted by the rank that
        # found the disagreement, so its next call raises that error.
        try:
            comm.barrier()
        except actorcc.Error as e:
            return time.monotonic() - t0, type(e).__name__, str(e), False
    return None


# The kinds of disagreement the shm check knows, each tried with the odd call on every rank.
ATTRIBUTION_KINDS = ("count", "dtype", "op", "root", "collective")


def attribution_case(i, world):
    """Round i of mismatch_rounds: (kind, odd rank), every kind at every position in turn."""
    return ATTRIBUTION_KINDS[i % len(ATTRIBUTION_KINDS)], (i // len(ATTRIBUTION_KINDS)) % world


def mismatch_rounds(rank, world, uids):
    """One group per uid: a matching all_reduce whose result is checked, then the round's
    mismatch (attribution_case). The warm-up's last sync point is where a rank still finishing
    it used to see the abort that a faster rank's next call raised. Returns per round the
    warm-up's failure (None when it completed with the right sum) and (seconds, type, culprit,
    message) of the mismatched call's error, or None where it completed."""
    out = []
    for i, uid in enumerate(uids):
        kind, odd = attribution_case(i, world)
        theirs, ours = MISMATCHES[kind]
        with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30) as comm:
            comm.host_barrier()
            warm = None
            x = np.full(1024, rank + 1, np.float32)
            try:
                comm.all_reduce(x)
                if not np.all(x == world * (world + 1) / 2):
                    warm = f"wrong sum {x[:4]}"
            except actorcc.Error as e:
                warm = f"{type(e).__name__}: {e}"
            t0 = time.monotonic()
            err = None
            try:
                _call(comm, world, theirs if rank == odd else ours)
            except actorcc.Error as e:
                err = (time.monotonic() - t0, type(e).__name__, e.culprit, str(e))
            out.append((kind, odd, warm, err))
    return out


def matching_sequences(rank, world, uid):
    """Long runs of varied but matching calls never trip the check (every collective, sizes on
    both sides of the one-shot limit, roots, ops), and results stay right."""
    rng = np.random.default_rng(1234)  # the same sequence on every rank
    fails = []
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30) as comm:
        for i in range(60):
            n = int(rng.choice([1, 7, 4099, 20000]))
            k = int(rng.integers(4))
            if k == 0:
                x = np.full(n, rank + 1, np.float64)
                comm.all_reduce(x, op="sum")
                if not np.all(x == world * (world + 1) / 2):
                    fails.append(f"call {i}: all_reduce wrong")
            elif k == 1:
                root = int(rng.integers(world))
                x = np.full(n, rank, np.int32)
                comm.broadcast(x, root=root)
                if not np.all(x == root):
                    fails.append(f"call {i}: broadcast wrong")
            elif k == 2:
                out = comm.all_gather(np.full(n, rank, np.int64))
                if not np.array_equal(out, np.repeat(np.arange(world), n)):
                    fails.append(f"call {i}: all_gather wrong")
            else:
                comm.barrier()
    return fails


OVERLAP_CASES = ("all_reduce shifted", "all_gather out over input, not at this rank's block",
                 "reduce_scatter out inside input, not at this rank's block")


def overlapping_views(rank, world, uid, case):
    """The exact in-place layouts pass, whether given as the same object or as another view of
    the same memory (address range, not identity); then an output that shares memory with the
    input in any other layout (`case`, made by every rank) is refused before anything moves.
    A refusal aborts the group (docs/reliability.md), so each case is a group of its own: a rank
    either refuses its own call or learns of another rank's refusal of the same overlap."""
    fails = []
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30) as comm:
        n = 8
        x = np.full(n, rank + 1, np.float32)
        comm.all_reduce(x, out=x[:])
        if not np.all(x == world * (world + 1) / 2):
            fails.append(f"in-place all_reduce through a view: {x}")
        full = np.zeros(world * n, np.int32)
        full[rank * n:(rank + 1) * n] = rank + 7
        comm.all_gather(full[rank * n:(rank + 1) * n], out=full)
        if not np.array_equal(full, np.repeat(np.arange(world) + 7, n)):
            fails.append(f"in-place all_gather: {full}")
        rs = np.ones(world * n, np.float32)
        comm.reduce_scatter(rs, out=rs[rank * n:(rank + 1) * n])
        if not np.all(rs[rank * n:(rank + 1) * n] == world):
            fails.append("in-place reduce_scatter wrong")

        # every rank is done with the calls above before any refusal below aborts the group
        comm.allgather_bytes(b"")
        buf = np.arange(4 * world * n, dtype=np.float32)
        before = buf.copy()
        nxt = (rank + 1) % world  # a block that is not this rank's
        # Every rank's call is refused (a buffer only the root uses is not compared elsewhere,
        # so rooted calls are covered by the C++ unit test instead).
        bad = {
            OVERLAP_CASES[0]: lambda: comm.all_reduce(buf[0:n], out=buf[1:n + 1]),
            OVERLAP_CASES[1]: lambda: comm.all_gather(buf[nxt * n:(nxt + 1) * n], out=buf[0:world * n]),
            OVERLAP_CASES[2]: lambda: comm.reduce_scatter(buf[0:world * n], out=buf[nxt * n + 1:nxt * n + 1 + n]),
        }
        try:
            bad[case]()
            fails.append(f"{case}: no error")
        except actorcc.InvalidArgumentError as e:
            if "overlap" not in str(e) or f"rank {rank}" not in str(e):
                fails.append(f"{case}: unclear error: {e}")
        except actorcc.RemoteError as e:
            if "overlap" not in str(e):
                fails.append(f"{case}: the group's abort does not say why: {e}")
        if not np.array_equal(buf, before):
            fails.append(f"{case}: data moved")
    return fails


def check_after_peer_abort(rank, world, uid):
    """check() and synchronize() pass on a healthy group and raise, naming the culprit, once
    rank 0 aborted; later calls raise too."""
    fails = []
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30) as comm:
        comm.check()
        comm.synchronize()
        w = comm.all_reduce(np.ones(16, np.float32), async_op=True)
        w.wait()
        comm.host_barrier()
        if rank == 0:
            comm.abort("rank 0 gives up on purpose")
        else:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 10:
                try:
                    comm.check()
                except actorcc.RemoteError as e:
                    if "rank 0" not in str(e) or e.rank != 0:
                        fails.append(f"check(): error does not name rank 0: {e} (culprit {e.rank})")
                    break
                time.sleep(0.01)
            else:
                fails.append("check() never raised after rank 0 aborted")
        for name, fn in [("check", comm.check), ("synchronize", comm.synchronize),
                         ("all_reduce", lambda: comm.all_reduce(np.ones(4, np.float32))),
                         ("Work.wait", lambda: comm.all_reduce(np.ones(4, np.float32), async_op=True).wait())]:
            try:
                fn()
                fails.append(f"{name} after the abort: no error")
            except actorcc.RemoteError:
                pass
    return fails


def checked_mismatch(rank, world, uid):
    """Checked mode (the exhaustive check over the bootstrap) prints the same descriptors."""
    with actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30, checked=True) as comm:
        try:
            comm.all_reduce(np.ones(8 if rank == world - 1 else 4, np.float32))
        except actorcc.InvalidArgumentError as e:
            return str(e), e.culprit
    return None
