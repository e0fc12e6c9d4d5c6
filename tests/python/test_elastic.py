"""Elastic membership from Python on the CPU backend (docs/elastic.md): a rank is SIGKILLed while
the others wait for it; the survivors shrink and get exact results; a restarted process takes the
dead rank back through grow. The C++ scenarios (every phase, 4 and 8 ranks, leaks, timings):
actorcc_elastic_tests."""
import actorcc
import pytest
from elastic_workers import kill_shrink_grow
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
