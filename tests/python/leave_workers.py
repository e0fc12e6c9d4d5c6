"""Rank functions for test_leave.py (spawned processes import them by module name)."""
import time

import numpy as np

import actorcc


def _values(rank, n):
    # rank- and position-dependent, exact in float32 for the sums below
    return (np.arange(n, dtype=np.float32) % 97) + 1000 * rank


def _outcome(fn):
    t0 = time.monotonic()
    try:
        fn()
        return ("returned", time.monotonic() - t0, "", None)
    except actorcc.RemoteError as e:
        return ("RemoteError", time.monotonic() - t0, str(e), getattr(e, "rank", None))
    except actorcc.Error as e:
        return (type(e).__name__, time.monotonic() - t0, str(e), getattr(e, "rank", None))


def leave_while_others_wait(rank, world, uid):
    """The last rank closes after one all_reduce while the others wait in the second."""
    c = actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30, join_timeout=30)
    x = _values(rank, 1001)
    c.all_reduce(x)
    if rank == world - 1:
        time.sleep(0.5)  # the others are inside their second all_reduce by now
        c.close()
        return None
    out = _outcome(lambda: c.all_reduce(_values(rank, 1001)))
    later = _outcome(lambda: c.all_reduce(_values(rank, 1001)))
    c.close()
    return out, later


def leave_then_p2p(rank, world, uid):
    """The last rank closes after one all_reduce; ranks 0 and 1 then still exchange messages,
    but a send to the leaver and any collective fail at once, naming it."""
    c = actorcc.Communicator(uid, rank, world, backend="cpu", timeout=30, join_timeout=30)
    c.all_reduce(_values(rank, 33))
    if rank == world - 1:
        c.close()
        return None
    time.sleep(1.0)  # the root has told everyone
    n = 4099
    ack = np.zeros(1, np.float32)
    if rank == 0:
        c.send(_values(7, n), 1)
        c.recv(ack, 1)  # rank 1 is done: the group's end below cannot cut its recv short
        got = None
    else:
        got = np.zeros(n, np.float32)
        c.recv(got, 0)
        got = bool(np.array_equal(got, _values(7, n)))
        c.send(ack, 0)
    to_leaver = _outcome(lambda: c.send(_values(rank, 5), world - 1)) if rank == 0 else None
    coll = _outcome(lambda: c.all_reduce(_values(rank, 5)))
    c.close()
    return got, to_leaver, coll
