"""A bad join under torch.distributed: a rank given another world_size raised on its own
after 5 s while the others waited out the whole timeout at their first call, then named only the
missing rank ("rank 2 of 3 did not join within T s"), never the world size. And the group's
timeout did not bound the first call's wait for rank 0's id (a store of its own kept its own
timeout, 5 minutes for a TCPStore). Skipped where torch is not installed."""
import pytest

torch = pytest.importorskip("torch")

import torch_join_workers as W  # noqa: E402
from conftest import free_port  # noqa: E402
from mp_helpers import run_ranks  # noqa: E402


def test_a_rank_given_another_world_size_fails_every_rank_naming_it():
    timeout_s = 60  # only the mismatch itself can end the waits within the bound
    res = run_ranks(3, W.world_size_mismatch, free_port(), timeout_s, timeout=90, expect_errors=True)
    for r, (kind, value) in enumerate(res):
        assert kind == "ok", f"rank {r}: {res[r]}"
        name, took, culprit, text = value
        assert name == "InvalidArgumentError", f"rank {r}: {value}"
        assert took < 10, f"rank {r} took {took:.1f} s: {text}"
        assert "disagree on the world size" in text and "at fault: 2" in text, f"rank {r}: {text}"
        want = "rank 0 has 3" if r == W.CULPRIT else "rank 2 has 4"
        assert want in text, f"rank {r}: {text}"
        assert culprit == W.CULPRIT, f"rank {r}: culprit {culprit}: {text}"


def test_the_groups_timeout_bounds_the_first_calls_wait_for_rank_0():
    timeout_s, absent_s = 3, 9  # absent beyond the bound below: a wait for rank 0 would fail it
    res = run_ranks(2, W.rank0_never_calls, free_port(), timeout_s, 120, absent_s, timeout=90, expect_errors=True)
    kind, value = res[1]
    assert kind == "ok", res[1]
    name, took, culprit, text = value
    assert name == "TimeoutError", value
    assert took < timeout_s + 4, f"took {took:.1f} s: {text}"
    assert "rank 0 did not create the group's cpu communicator within the group's timeout of 3 s" in text, text
    assert culprit == 0, value
