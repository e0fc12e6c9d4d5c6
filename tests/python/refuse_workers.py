"""Rank functions for test_join_refusal.py: one rank makes a mistake of its own before it joins
(a bad backend, a rank out of range, a device it cannot use, a bad timeout, another world size);
every rank reports what it raised, how long it took, and the error's culprit."""
import time

import actorcc

JOIN_TIMEOUT_S = 120  # only a refusal can end the others' joins within the tests' bounds
CULPRIT = 2

# What the culprit passes instead of the right arguments: (rank, world, keyword arguments).
MISTAKES = {
    "backend": lambda r, w: (r, w, {"backend": "cpuu"}),
    "rank": lambda r, w: (w, w, {}),
    "device": lambda r, w: (r, w, {"device": "cuda:99", "backend": "auto"}),
    "timeout": lambda r, w: (r, w, {"timeout": -1}),
    "contradiction": lambda r, w: (r, w, {"device": "cpu", "backend": "cuda"}),
    "world": lambda r, w: (r, w + 1, {}),
}


def _outcome(make):
    t0 = time.monotonic()
    try:
        with make():
            return "joined", time.monotonic() - t0, None, ""
    except actorcc.Error as e:
        return type(e).__name__, time.monotonic() - t0, getattr(e, "culprit", None), str(e)


def one_rank_errs(rank, world, uid, mistake):
    r, w, kw = (rank, world, {})
    if rank == CULPRIT:
        r, w, kw = MISTAKES[mistake](rank, world)
    kw = {"backend": "cpu", **kw}
    return _outcome(lambda: actorcc.Communicator(uid, r, w, join_timeout=JOIN_TIMEOUT_S, **kw))


def one_rank_errs_from_address(rank, world, port, mistake):
    r, w, kw = (rank, world, {})
    if rank == CULPRIT:
        r, w, kw = MISTAKES[mistake](rank, world)
    kw = {"backend": "cpu", **kw}
    out = _outcome(lambda: actorcc.Communicator.from_address("127.0.0.1", port, r, w, join_timeout=JOIN_TIMEOUT_S,
                                                             **kw))
    if rank == 0:  # its process hosts the root: it stays a while, as a program reporting its error would
        time.sleep(3)
    return out

