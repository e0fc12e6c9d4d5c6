"""Suspend and resume from Python, on the CPU backend: Communicator.suspend()
unmaps the group's shared segment on every rank, mem_stats() says so, every call while suspended
raises an UnsupportedError naming the suspension at once, and 20 cycles stay exact; the "actorcc"
torch backend offers ProcessGroupNCCL's suspend() / resume() / memory_stats()."""
import socket

import pytest

import actorcc
from mp_helpers import run_ranks, values
import suspend_workers as W


def test_twenty_cycles_release_the_segment_refuse_calls_and_stay_exact():
    uid = actorcc.UniqueId.create("127.0.0.1")
    res = values(run_ranks(3, W.cycles, str(uid), 20, timeout=120))
    for rank, seen in enumerate(res):
        assert len(seen) == 20
        for k, s in enumerate(seen):
            where = (rank, k)
            assert s["exact"] and s["a2a_exact"], where
            assert s["maps"] == 0, (where, "the segment is still mapped while suspended")
            assert s["suspended"] and s["stats"]["suspended"], where
            assert s["stats"]["suspendable_bytes"] == 0, (where, s["stats"])
            assert s["stats_after"]["suspendable_bytes"] > 0 and not s["stats_after"]["suspended"], where
            assert s["stats_after"]["total_bytes"] == seen[0]["stats_after"]["total_bytes"], where
            for call in ("all_reduce", "all_to_all", "barrier"):
                kind, took, msg = s[call]
                assert kind == "UnsupportedError", (where, call, s[call])
                assert "suspended" in msg and f"rank {rank}" in msg, (where, call, msg)
                assert took < 1.0, (where, call, took)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torch_backend_suspend_resume_and_memory_stats():
    pytest.importorskip("torch")
    res = values(run_ranks(2, W.torch_backend, _free_port(), timeout=120))
    for rank, r in enumerate(res):
        assert r["first"] and all(r["results"]), (rank, r)
        assert r["active"]["suspendable_bytes"] > 0 and r["active"]["suspended"] == 0, (rank, r["active"])
        assert r["during"]["suspendable_bytes"] == 0 and r["during"]["suspended"] == 1, (rank, r["during"])
        assert all(isinstance(v, int) for v in r["during"].values()), r["during"]  # ProcessGroupNCCL's shape
        assert r["maps"] == 0, (rank, "the segment is still mapped while suspended")
        kind, took, msg = r["refused"]
        assert kind == "UnsupportedError" and "suspended" in msg, (rank, r["refused"])
        assert r["after"] == r["active"], (rank, r["after"], r["active"])


def test_a_group_across_nodes_refuses_suspend_on_every_rank_and_goes_on():
    uid = actorcc.UniqueId.create("127.0.0.1")
    res = values(run_ranks(2, W.refused_across_nodes, str(uid), timeout=60,
                           env=lambda r: {"ACTORCC_NODE_ID": f"vnode{r}"}))
    for rank, ((kind, took, msg), ok) in enumerate(res):
        assert kind == "UnsupportedError" and "cannot release its memory" in msg, (rank, msg)
        assert took < 1.0 and ok, (rank, took, ok)
