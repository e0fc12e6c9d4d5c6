"""Rank functions for test_reliability.py: rank 0 forks after joining (its child uses
the inherited communicator, or only exits, and the parent and rank 1 go on); setup failures."""
import atexit
import gc
import os
import select
import time

import numpy as np

import actorcc

N = 1001  # odd: no route's block size divides it


def _child(c, mode, w):
    """Runs in the fork child: never returns (os._exit after the teardown a child would run)."""
    report = "no call"
    try:
        if mode == "call":
            try:
                c.all_reduce(np.full(N, 100, np.int64))  # would pair with rank 1's call
                report = "returned"
            except actorcc.Error as e:
                report = f"{type(e).__name__}|{getattr(e, 'culprit', None)}|{e}"
        # Everything a child's exit runs: the object's teardown, garbage collection, atexit.
        c.close()
        del c
        gc.collect()
        atexit._run_exitfuncs()
        os.write(w, report.encode())
    finally:
        os._exit(0)


def fork_after_join(rank, world, uid, mode):
    c = actorcc.Communicator(uid, rank, world, backend="cpu", timeout=20, join_timeout=30)
    x = np.full(N, rank + 1, np.int64)
    c.all_reduce(x)
    assert (x == 3).all()
    child_report = None
    if rank == 0:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            _child(c, mode, w)
        os.close(w)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 15:  # bounded: the child must end on its own
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError("the fork child did not exit within 15 s")
        if select.select([r], [], [], 1)[0]:
            child_report = os.read(r, 65536).decode()
        os.close(r)
    # The parent is still rank 0 and rank 1 never noticed the child: 1001 + 2001.
    t0 = time.monotonic()
    y = np.full(N, 1001 + 1000 * rank, np.int64)
    c.all_reduce(y)
    z = np.arange(N, dtype=np.float64) * (rank + 1)
    c.all_reduce(z)
    c.close()
    return {"first": y.tolist()[:3], "exact": bool((y == 3002).all()), "second": bool((z == np.arange(N) * 3).all()),
            "after_fork_s": time.monotonic() - t0, "child": child_report}


def setup_failure(rank, world, uid):
    """A workspace no /dev/shm can hold: the creator's posix_fallocate fails (ENOSPC at once on
    tmpfs, which checks the size against its limit before allocating anything)."""
    t0 = time.monotonic()
    try:
        actorcc.Communicator(uid, rank, world, backend="cpu", timeout=20, join_timeout=20, workspace_bytes=1 << 42)
    except actorcc.Error as e:
        return type(e).__name__, e.culprit, str(e), time.monotonic() - t0
    return None


# One rank of two 2-rank launches A and B that share a from_address address.
# Index 0..3 plays A0, A1, B0, B1; each waits for its go-file (the test sets the order), then
# joins and all-reduces its launch's values: A's sum is 3, B's 30, anything else mixes them;
# a rank that formed a group keeps it until the end-file (every rank has started).
LAUNCH_RANKS = [("A", 0, 1), ("A", 1, 2), ("B", 0, 10), ("B", 1, 20)]


def launch_rank(index, _world, port, tmp):
    launch, rank, value = LAUNCH_RANKS[index]
    open(os.path.join(tmp, f"ready-{index}"), "w").close()
    go = os.path.join(tmp, f"go-{index}")
    t0 = time.monotonic()
    while not os.path.exists(go):
        if time.monotonic() - t0 > 60:
            raise AssertionError("never told to start")
        time.sleep(0.005)
    c = actorcc.Communicator.from_address("127.0.0.1", port, rank, 2, backend="cpu", timeout=20, join_timeout=8)
    x = np.full(8, value, np.int64)
    c.all_reduce(x)
    # The group stays up until every rank has started, so that B's rank 0 always finds A's root.
    while not os.path.exists(os.path.join(tmp, "end")) and time.monotonic() - t0 < 60:
        time.sleep(0.005)
    c.close()
    return int(x[0])
