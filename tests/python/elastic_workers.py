"""Rank functions for test_elastic.py and test_gpu_elastic.py (spawned processes import them by
module name): a rank is SIGKILLed while the others' call waits for it, the survivors shrink and
check an exact all_reduce, then grow back with a restarted process that the new rank 0 starts
(as Ray would restart the actor) taking the dead rank's place."""
import os
import signal
import subprocess
import sys
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


def _cuda_ready(device):
    """The CUDA context, made before any clock starts."""
    if device != "cpu":
        import torch
        torch.cuda.set_device(0)
        torch.zeros(1, device="cuda")


def _communicator(uid, rank, world, device):
    kind = {"backend": "cpu"} if device == "cpu" else {"device": 0}
    return actorcc.Communicator(uid, rank, world, timeout=20, join_timeout=20, **kind)


def _open(uid, rank, world, device):
    _cuda_ready(device)
    return _communicator(uid, rank, world, device)


def _die_in_next_call(stamp_dir):
    """This rank's exit: SIGKILL once the others wait inside their next all_reduce, the time
    written first (the survivors measure from it)."""
    time.sleep(0.3)
    with open(os.path.join(stamp_dir, "killed"), "w") as f:
        f.write(repr(time.monotonic()))
    os.kill(os.getpid(), signal.SIGKILL)


def newcomer(uid, rank, world, device, n, stamp_dir=None, last=True):
    """The restarted process (`python -m elastic_workers UID RANK WORLD DEVICE N [STAMP_DIR LAST]`):
    ready to call (imports and CUDA context done), then its first correct collective in the grown
    group; prints the seconds between the two. With STAMP_DIR (kill_rejoin_cycles) it is the next
    cycle's victim unless LAST is 1."""
    _cuda_ready(device)
    ready = time.monotonic()
    c = _communicator(uid, rank, world, device)
    _check(c, device, n, list(range(world)))
    print("REJOIN", time.monotonic() - ready, flush=True)
    if stamp_dir is not None and not last:
        _die_in_next_call(stamp_dir)
    c.host_barrier()
    c.close()


def _start_newcomer(uid, rank, world, device, n, *extra):
    # A process of its own (the rank functions run in daemonic processes, which multiprocessing
    # does not let have children), as Ray would restart the actor.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.abspath(__file__)),
                                                       os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-m", "elastic_workers", str(uid), str(rank), str(world), device, str(n),
                             *map(str, extra)], env=env, stdout=subprocess.PIPE, text=True)


def kill_shrink_grow(rank, world, uid, device, victim, stamp_dir, n=4099):
    """`victim` SIGKILLs itself while the others' all_reduce waits for it (on the GPU: their
    kernel is already waiting); the survivors shrink, check, and grow back to `world`."""
    c = _open(uid, rank, world, device)
    _check(c, device, n, list(range(world)))
    if rank == victim:
        _die_in_next_call(stamp_dir)
    x = _tensor(device, n, rank)
    t0 = time.monotonic()
    try:
        c.all_reduce(x)
        c.synchronize()
        raise AssertionError(f"rank {rank}: the call completed without rank {victim}")
    except actorcc.Error as e:  # RemoteError (the group's abort); on the GPU through the kernel's record
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
        child = _start_newcomer(uid2, victim, world, device, n)
    g = s.grow(world, uid2, rank=rank, join_timeout=60)
    _check(g, device, n, list(range(world)))
    rejoin = None
    if child is not None:
        line = child.stdout.readline()  # the newcomer's line, before the barrier both reach
        assert line.startswith("REJOIN"), line
        rejoin = float(line.split()[1])
    g.host_barrier()
    if child is not None:
        assert child.wait(timeout=30) == 0
    s.close()
    g.close()
    return {"detect": detect, "kill_to_first_ok": first_ok - killed, "rejoin": rejoin}


def two_die_together(rank, world, uid, dead, stamp_dir, n=4099):
    """The ranks in `dead` SIGKILL themselves while the others wait in an all_reduce; the survivors
    follow the documented recipe (docs/elastic.md): shrink without the error's culprits, again
    without any rank a failed shrink names. Their join timeout is 60 s: a shrink waiting for the
    second dead rank would spend it. Returns the error's culprits (once both are known) and the
    seconds from the kill to the shrunk group's exact all_reduce."""
    c = actorcc.Communicator(uid, rank, world, backend="cpu", timeout=20, join_timeout=60)
    _check(c, "cpu", n, list(range(world)))
    # A rank's call returning says nothing of the others' same call: a rank killed right after its
    # all_reduce returned may fail a survivor's still in flight (its last bytes reset unread), an
    # error before the recipe starts. The barrier lets every rank's first check end first.
    c.host_barrier()
    if rank in dead:
        if rank == dead[0]:
            with open(os.path.join(stamp_dir, "killed"), "w") as f:
                f.write(repr(time.monotonic()))
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        c.all_reduce(_tensor("cpu", n, rank))
        raise AssertionError(f"rank {rank}: the call completed without ranks {dead}")
    except actorcc.RemoteError as e:
        err = e
    assert err.culprit in dead and isinstance(err.culprits, list), (err.culprit, err.culprits)
    exclude = list(err.culprits)
    while True:
        try:
            s = c.shrink(exclude)
            break
        except (actorcc.RemoteError, actorcc.TimeoutError) as e:
            more = set(e.culprits) - set(exclude)
            assert more, (exclude, e.culprits, str(e))
            exclude = sorted(set(exclude) | more)
    survivors = [r for r in range(world) if r not in dead]
    assert s.world_size == len(survivors), (s.world_size, survivors)
    _check(s, "cpu", n, survivors)
    done = time.monotonic()
    with open(os.path.join(stamp_dir, "killed")) as f:
        killed = float(f.read())
    # The old group's error, now: it lists both dead ranks (the root reported both).
    try:
        c.check()
    except actorcc.RemoteError as e:
        later = e.culprits
    s.host_barrier()
    s.close()
    c.close()
    return {"first": list(err.culprits), "later": later, "kill_to_first_ok": done - killed}


def kill_rejoin_cycles(rank, world, uid, device, stamp_dir, cycles, n=4099):
    """`cycles` times over: the last rank is SIGKILLed while the others' all_reduce waits for it
    (on the GPU: their kernel is already waiting), the survivors shrink and check, and a restarted
    process grows back into the last rank, which the next cycle kills again. The survivors'
    processes live through every cycle. Returns, per cycle, the time from the kill to the
    survivors' first correct call and (rank 0) the restarted process's rejoin time."""
    victim = world - 1
    c = _open(uid, rank, world, device)
    _check(c, device, n, list(range(world)))
    if rank == victim:
        _die_in_next_call(stamp_dir)
    survivors = list(range(victim))
    kills, rejoins, children = [], [], []
    for cycle in range(cycles):
        x = _tensor(device, n, rank)
        try:
            c.all_reduce(x)
            c.synchronize()
            raise AssertionError(f"rank {rank}: cycle {cycle}: the call completed without rank {victim}")
        except actorcc.Error as e:
            assert e.culprit == victim, (rank, cycle, e.culprit, str(e))
        s = c.shrink([victim], join_timeout=10)
        _check(s, device, n, survivors)
        first_ok = time.monotonic()
        c.close()
        with open(os.path.join(stamp_dir, "killed")) as f:
            kills.append(first_ok - float(f.read()))
        uid2 = s.grow_id() if s.rank == 0 else None
        if uid2 is not None:
            children.append(_start_newcomer(uid2, victim, world, device, n, stamp_dir, int(cycle == cycles - 1)))
        c = s.grow(world, uid2, rank=rank, join_timeout=60)
        s.close()
        _check(c, device, n, list(range(world)))
        if uid2 is not None:
            line = children[-1].stdout.readline()
            assert line.startswith("REJOIN"), line
            rejoins.append(float(line.split()[1]))
    c.host_barrier()
    c.close()
    for child in children:  # every one but the last was SIGKILLed; reaped, so none stays a zombie
        assert child.wait(timeout=30) in (0, -signal.SIGKILL)
    assert children == [] or children[-1].returncode == 0
    return {"kill_to_first_ok": kills, "rejoin": rejoins}


if __name__ == "__main__":
    stamp_dir, last = (sys.argv[6], sys.argv[7] == "1") if len(sys.argv) > 6 else (None, True)
    newcomer(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), stamp_dir, last)
