"""Rank functions for test_elastic.py and test_gpu_elastic.py (spawned processes import them by
module name): a rank is SIGKILLed while the others' call waits for it, the survivors shrink and
check an exact all_reduce, then grow back with a restarted process that the new rank 0 starts
(as Ray would restart the actor) taking the dead rank's place."""
import multiprocessing as mp
import os
import signal
import time

import numpy as np

import actorcc


def _tensor(device, n, rank):
    x = (np.arange(n, dtype=np.float64) % 251) + 1000.0 * (rank + 1)
    if device == "cpu":
        return x
    import torch
    return torch.from_numpy(x).to(device)


def _expected(n, ranks):
    return sum((np.arange(n, dtype=np.float64) % 251) + 1000.0 * (r + 1) for r in ranks)


def _check(comm, device, n, ranks_by_new_rank):
    """An exact all_reduce of float64 inputs named by each rank's original rank."""
    x = _tensor(device, n, ranks_by_new_rank[comm.rank])
    comm.all_reduce(x)
    if device != "cpu":
        comm.synchronize()
        x = x.cpu().numpy()
    want = _expected(n, ranks_by_new_rank)
    bad = np.flatnonzero(x != want)
    assert bad.size == 0, f"rank {comm.rank}: {bad.size} wrong elements, first at {bad[:3]}"


def _open(uid, rank, world, device):
    if device == "cpu":
        return actorcc.Communicator(uid, rank, world, backend="cpu", timeout=20, join_timeout=20)
    import torch
    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")  # the CUDA context, before the clock starts
    return actorcc.Communicator(uid, rank, world, device=0, timeout=20, join_timeout=20)


def _newcomer(uid, rank, world, device, n, conn):
    """The restarted process: ready to call (imports and CUDA context done), then its first
    correct collective in the grown group."""
    try:
        if device != "cpu":
            import torch
            torch.cuda.set_device(0)
            torch.zeros(1, device="cuda")
        ready = time.monotonic()
        c = (actorcc.Communicator(uid, rank, world, backend="cpu", timeout=20, join_timeout=20) if device == "cpu"
             else actorcc.Communicator(uid, rank, world, device=0, timeout=20, join_timeout=20))
        _check(c, device, n, list(range(world)))
        done = time.monotonic()
        c.host_barrier()
        c.close()
        conn.send(("ok", done - ready))
    except BaseException as e:  # noqa: BLE001 - reported to the test
        conn.send(("err", repr(e)))


def kill_shrink_grow(rank, world, uid, device, victim, stamp_dir, n=4099):
    """`victim` SIGKILLs itself while the others' all_reduce waits for it (on the GPU: their
    kernel is already waiting); the survivors shrink, check, and grow back to `world`."""
    c = _open(uid, rank, world, device)
    _check(c, device, n, list(range(world)))
    if rank == victim:
        time.sleep(0.3)  # the others are inside their next all_reduce by now
        with open(os.path.join(stamp_dir, "killed"), "w") as f:
            f.write(repr(time.monotonic()))
        os.kill(os.getpid(), signal.SIGKILL)
    x = _tensor(device, n, rank)
    t0 = time.monotonic()
    try:
        c.all_reduce(x)
        c.synchronize()
        raise AssertionError(f"rank {rank}: the call completed without rank {victim}")
    except actorcc.RemoteError as e:
        assert e.culprit == victim and f"rank {victim}" in str(e), (rank, e.culprit, str(e))
    detect = time.monotonic() - t0
    s = c.shrink([victim], join_timeout=10)
    survivors = [r for r in range(world) if r != victim]
    _check(s, device, n, survivors)
    first_ok = time.monotonic()
    c.close()
    with open(os.path.join(stamp_dir, "killed")) as f:
        killed = float(f.read())
    # Grow back: the new rank 0 starts the restarted process with the grown group's id.
    child = None
    uid2 = None
    if s.rank == 0:
        uid2 = s.grow_id()
        parent, end = mp.get_context("spawn").Pipe(duplex=False)
        child = mp.get_context("spawn").Process(target=_newcomer, args=(uid2, victim, world, device, n, end))
        child.start()
    g = s.grow(world, uid2, rank=rank, join_timeout=60)
    _check(g, device, n, list(range(world)))
    rejoin = None
    if child is not None:
        status, rejoin = parent.recv()
        assert status == "ok", rejoin
        child.join(30)
    g.host_barrier()
    s.close()
    g.close()
    return {"detect": detect, "kill_to_first_ok": first_ok - killed, "rejoin": rejoin}
