"""torch.distributed with backend "actorcc" (CPU tensors, 2-3 spawned ranks) when one rank fails:
its peers' pending Work raises naming it, from wait(), is_completed() and the future DDP's comm
hooks chain on, and so does their next call; DDP's backward raises too. Skipped where torch is
not installed."""
import re

import pytest

torch = pytest.importorskip("torch")

import torch_error_workers as W  # noqa: E402
from conftest import free_port  # noqa: E402
from mp_helpers import run_ranks  # noqa: E402


# What each failure must say on the other ranks (besides naming the culprit).
CAUSE = {"dies": "", "stalls": "waiting for rank", "refuses": "called all_reduce", "aborts": "abort",
         "refuses_op": "reduce op"}


@pytest.mark.parametrize("how", sorted(CAUSE))
def test_pending_work_raises_naming_the_failed_rank(how):
    world = 3 if how == "dies" else 2  # a death: two survivors, each must name it
    res = run_ranks(world, W.pending_work_raises, free_port(), how, timeout=120, expect_errors=True)
    for r, (kind, value) in enumerate(res):
        if r == W.CULPRIT:
            if how == "dies":
                assert kind == "died", res[r]
            else:
                assert kind == "ok" and not value[0], res[r]
                if how == "refuses":  # the culprit's own call raised, naming both calls
                    assert "called all_reduce(count=1000" in value[1]["culprit"], value[1]
                if how == "refuses_op":  # the culprit's own error says what it cannot run
                    assert value[1]["culprit"].startswith("UnsupportedError") and "BAND" in value[1]["culprit"], value[1]
            continue
        assert kind == "ok", f"rank {r}: {res[r]}"
        fails, seen = value
        assert not fails, f"rank {r}: {fails} {seen}"
        assert set(seen) == {"wait", "future", "is_completed", "next call"}, seen
        for check, msg in seen.items():
            assert re.search(rf"rank(\(s\))? {W.CULPRIT}\b", msg), f"rank {r} {check}: {msg}"
            assert CAUSE[how] in msg, f"rank {r} {check}: {msg}"


def test_ddp_backward_raises_when_a_peer_dies():
    res = run_ranks(3, W.ddp_peer_dies, free_port(), timeout=120, expect_errors=True)
    assert res[W.CULPRIT][0] == "died", res[W.CULPRIT]
    for r in (0, 2):
        kind, value = res[r]
        assert kind == "ok" and value is not None, f"rank {r}: DDP kept training: {res[r]}"
        step, took, msg = value
        assert step == 2 and f"rank {W.CULPRIT}" in msg and took < W.TIMEOUT_S + 4, f"rank {r}: {value}"


def test_rank0_hosting_the_root_dies_and_is_named_as_rank0():
    # torch users never call UniqueId.create(): the backend's rank 0 does, so the root's loss is
    # reported as rank 0's death, with rank 0 as the culprit.
    res = run_ranks(3, W.root_rank_dies, free_port(), timeout=120, expect_errors=True)
    assert res[0][0] == "died", res[0]
    for r in (1, 2):
        kind, (msg, culprit) = res[r]
        assert kind == "ok", f"rank {r}: {res[r]}"
        assert "rank 0 (which hosts the group's root) died" in msg, f"rank {r}: {msg}"
        assert "UniqueId.create()" not in msg, f"rank {r}: {msg}"
        assert culprit == 0, f"rank {r}: culprit {culprit}: {msg}"
