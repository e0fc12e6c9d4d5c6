"""A rank whose own arguments keep it from joining (a bad backend, a rank out of
range, a device it cannot use, a bad timeout) raised at once on that rank, while every other rank
waited out the join timeout (600 s by default) for it. Now the rank tells the group's root before
it raises, and every other rank fails within seconds, naming it and the mistake. The join timeout
is 120 s here: only the refusal ends the others' joins within the bound asserted."""
import pytest

import refuse_workers as W
from conftest import free_port
from mp_helpers import run_ranks

WORLD = 3
BOUND_S = 10  # against a join timeout of 120 s

# What the others' error must say about the culprit's mistake.
CAUSE = {
    "backend": "unknown backend 'cpuu'",
    "rank": "is outside the group of 3",
    "device": "cuda",
    "timeout": "timeout must be > 0",
    "contradiction": "contradict",
}


def _check_others(res, mistake, culprit_text, culprit):
    for r, (kind, value) in enumerate(res):
        assert kind == "ok", f"rank {r}: {res[r]}"
        name, took, got_culprit, text = value
        if r == W.CULPRIT:
            assert name != "joined" and took < BOUND_S, f"rank {r}: {value}"
            continue
        assert name == "RemoteError", f"rank {r}: {value}"
        assert took < BOUND_S, f"rank {r} waited {took:.1f} s: {text}"
        assert culprit_text in text and "refused to join" in text, f"rank {r}: {text}"
        assert CAUSE[mistake] in text, f"rank {r}: {text}"
        assert got_culprit == culprit, f"rank {r}: culprit {got_culprit}: {text}"


@pytest.mark.parametrize("mistake", sorted(CAUSE))
def test_a_rank_that_cannot_join_fails_every_rank_within_seconds(uid, mistake):
    res = run_ranks(WORLD, W.one_rank_errs, uid, mistake, timeout=60, expect_errors=True)
    if mistake == "rank":  # rank 3 of 3 is no rank of the group: named by what it claimed
        _check_others(res, mistake, "a joiner claiming rank 3 of world 3 (host ", -1)
    else:
        _check_others(res, mistake, f"rank {W.CULPRIT} (host ", W.CULPRIT)


def test_a_rank_out_of_range_on_the_from_address_path_fails_every_rank():
    res = run_ranks(WORLD, W.one_rank_errs_from_address, free_port(), "rank", timeout=60, expect_errors=True)
    _check_others(res, "rank", "a joiner claiming rank 3 of world 3 (host ", -1)


def test_another_world_size_fails_every_rank_naming_both(uid):
    # Worked before (the root compares the sizes the ranks give); kept beside its siblings.
    res = run_ranks(WORLD, W.one_rank_errs, uid, "world", timeout=60, expect_errors=True)
    for r, (kind, value) in enumerate(res):
        assert kind == "ok", f"rank {r}: {res[r]}"
        name, took, culprit, text = value
        assert name in ("RemoteError", "InvalidArgumentError") and took < BOUND_S, f"rank {r}: {value}"
        assert "rank 2 gave a world size other than" in text and "world size 4" in text, f"rank {r}: {text}"
        assert r == W.CULPRIT or culprit == W.CULPRIT, f"rank {r}: {value}"
