"""Elastic membership from Python on the CPU backend (docs/elastic.md): a rank is SIGKILLed while
the others wait for it; the survivors shrink and get exact results; a restarted process takes the
dead rank back through grow. The C++ scenarios (every phase, 4 and 8 ranks, leaks, timings):
actorcc_elastic_tests."""
import resource
import time

import actorcc
import numpy as np
import pytest
from elastic_workers import kill_shrink_grow, two_die_together
from mp_helpers import run_ranks


def test_kill_shrink_then_grow_back(tmp_path):
    uid = actorcc.UniqueId.create("127.0.0.1")
    res = run_ranks(3, kill_shrink_grow, str(uid), "cpu", 1, str(tmp_path), timeout=90, expect_errors=True)
    assert res[1][0] == "died", res[1]
    for r in (0, 2):
        assert res[r][0] == "ok", res[r]
        t = res[r][1]
        assert t["detect"] < 3.0 and t["kill_to_first_ok"] < 3.0, t
    assert res[0][1]["rejoin"] is not None and res[0][1]["rejoin"] < 5.0, res[0][1]


def test_shrink_refuses_bad_exclude_lists():
    c = actorcc.Communicator(actorcc.UniqueId.create("127.0.0.1"), 0, 1, backend="cpu")
    with pytest.raises(actorcc.InvalidArgumentError, match="exclude list"):
        c.shrink([0])
    with pytest.raises(actorcc.InvalidArgumentError, match="outside the group"):
        c.shrink([5])
    s = c.shrink([])  # a group of one shrinks to itself
    assert s.world_size == 1 and s.rank == 0
    with pytest.raises(actorcc.RemoteError, match="revoked by shrink"):
        c.barrier()
    with pytest.raises(actorcc.InvalidArgumentError, match="shrunk already"):
        c.shrink([])
    s.close()
    c.close()


def test_two_deaths_at_once_shrink_through_the_recipe_within_seconds(tmp_path):
    # Ranks 3 and 4 of 6 SIGKILLed together. The survivors' errors come to list both
    # (err.culprits) and the recipe reaches an exact all_reduce within 5 s of the kill, against a
    # 60 s join timeout that a shrink waiting for rank 4 would spend.
    uid = actorcc.UniqueId.create("127.0.0.1")
    res = run_ranks(6, two_die_together, str(uid), [3, 4], str(tmp_path), timeout=120, expect_errors=True)
    for r in (3, 4):
        assert res[r][0] == "died", res[r]
    for r in (0, 1, 2, 5):
        assert res[r][0] == "ok", res[r]
        t = res[r][1]
        assert t["later"] == [3, 4] and set(t["first"]) <= {3, 4}, t
        assert t["kill_to_first_ok"] < 5.0, t


def test_grow_refuses_a_size_beyond_the_bound_before_sizing_anything():
    # grow(2**31 - 1) sized a vector by it (8 GiB per rank) before the 1..65536 check.
    c = actorcc.Communicator(actorcc.UniqueId.create("127.0.0.1"), 0, 1, backend="cpu", timeout=20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB, the peak so far
    t0 = time.monotonic()
    for bad in (2**31 - 1, 65537):
        with pytest.raises(actorcc.InvalidArgumentError, match=r"1\.\.65536"):
            c.grow(bad, c.grow_id())
    assert time.monotonic() - t0 < 5.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 256 * 1024
    c.all_reduce(np.ones(4))  # the group is undisturbed
    c.close()
