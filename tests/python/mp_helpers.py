"""Runs one function in `world` spawned processes (one per rank) and collects what each
returned or raised. The group's UniqueId is created in the test process (its root runs here),
like a Ray driver does."""
from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback


def _child(fn, rank, world, args, conn, env):
    os.environ.update(env)
    try:
        res = ("ok", fn(rank, world, *args))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        info = {
            "type": type(e).__name__,
            "mro": [c.__name__ for c in type(e).__mro__],
            "msg": str(e),
            "rank": getattr(e, "rank", None),
            "culprit": getattr(e, "culprit", None),
            "tb": traceback.format_exc(),
        }
        res = ("err", info)
    try:
        conn.send(res)
    finally:
        conn.close()


class RankError(AssertionError):
    pass


def run_ranks(world, fn, *args, timeout=120.0, env=None, expect_errors=False):
    """fn(rank, world, *args) in `world` processes; returns [("ok", value) | ("err", info)]
    by rank. Unless expect_errors, any error fails the test with the rank's traceback.
    Processes still alive at `timeout` are killed and reported as ("timeout", None).
    env: a dict for every rank, or a function rank -> dict (set in the child before `fn`'s
    module is used, e.g. CUDA_VISIBLE_DEVICES)."""
    ctx = mp.get_context("spawn")
    procs, conns = [], []
    for r in range(world):
        parent, child = ctx.Pipe(duplex=False)
        e = env(r) if callable(env) else (env or {})
        p = ctx.Process(target=_child, args=(fn, r, world, args, child, e), daemon=True)
        saved = {k: os.environ.get(k) for k in e}
        os.environ.update(e)  # inherited from the start: before the child's interpreter exists
        try:
            p.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        child.close()
        procs.append(p)
        conns.append(parent)
    deadline = time.monotonic() + timeout
    results = [None] * world
    for r, (p, c) in enumerate(zip(procs, conns)):
        left = max(0.1, deadline - time.monotonic())
        if c.poll(left):
            try:
                results[r] = c.recv()
            except EOFError:
                results[r] = ("died", p.exitcode)
        else:
            results[r] = ("timeout", None)
    for p in procs:
        p.join(timeout=max(0.1, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(5)
    if not expect_errors:
        bad = [(r, res) for r, res in enumerate(results) if res[0] != "ok"]
        if bad:
            lines = []
            for r, (kind, info) in bad:
                lines.append(f"rank {r}: {kind}: " + (info["tb"] if isinstance(info, dict) else str(info)))
            raise RankError("\n".join(lines))
    return results


def values(results):
    return [v for _, v in results]


def expect_no_failures(results, note=""):
    """Fails the test with the first failures of each rank whose function returned a
    non-empty list of failure descriptions (`note`: e.g. the seed that reproduces them)."""
    bad = [f"rank {r}{note}: {fails[:10]}" for r, fails in enumerate(values(results)) if fails]
    assert not bad, "\n".join(bad)
