"""Errors about a call that every rank must see (CPU backend, spawned ranks): ranks that
disagree on a call are caught by default (the descriptor in the shm protocol), outputs that
overlap their input are refused by address range, and check() / synchronize() / Work.wait()
report the group's error."""
import pytest

import error_workers
from mp_helpers import expect_no_failures, run_ranks


# nodes: each rank's ACTORCC_NODE_ID ("" for one host). "ab": two virtual nodes of one rank,
# so only the TCP frames between them can carry the disagreement; "aabb": the odd rank's node
# peer finds it in shared memory, the other node in a frame (or through the abort).
@pytest.mark.parametrize("case", sorted(error_workers.MISMATCHES))
@pytest.mark.parametrize("world,odd,nodes", [(2, 1, ""), (3, 2, ""), (2, 1, "ab"), (4, 3, "aabb")])
def test_mismatched_calls_raise_on_every_rank_naming_both(uid, case, world, odd, nodes):
    env = (lambda r: {"ACTORCC_NODE_ID": nodes[r]}) if nodes else None
    res = run_ranks(world, error_workers.mismatch, uid, case, odd, env=env, expect_errors=True, timeout=90)
    theirs, ours = error_workers.MISMATCHES[case]

    def text(spec):  # the descriptor as the library prints it, up to the dtype
        name, n, dtype, _ = spec
        return f"{name}()" if name == "barrier" else f"{name}(count={n}, {dtype}"

    for r, (kind, out) in enumerate(res):
        assert kind == "ok" and out is not None, f"rank {r}: {kind} {out}"
        secs, typ, msg, in_call = out
        # Only a rank on another node than the odd rank may finish the call (it never waited
        # for anyone who disagreed); its next call raises.
        assert in_call or (nodes and nodes[r] != nodes[odd]), f"rank {r} completed the mismatched call"
        assert in_call or typ == "RemoteError", f"rank {r}: {typ}: {msg}"
        # Far below the 30 s call timeout: found at the call's first sync point, not by waiting.
        assert secs < 5, f"rank {r}: {secs:.1f} s: {msg}"
        assert typ in ("InvalidArgumentError", "RemoteError"), f"rank {r}: {typ}: {msg}"
        assert "mismatched" in msg and text(theirs) in msg and text(ours) in msg, f"rank {r}: {msg}"
        assert f"rank {odd} called {text(theirs)}" in msg, f"rank {r}: {msg}"


# 50 groups of 3 ranks: a matching warm-up all_reduce, then every kind of disagreement with the
# odd call on each rank in turn. The warm-up completes with its data on every rank (before, in
# about 1 run of 4 of the test above, a rank still finishing it raised the next call's error),
# and every rank names the odd rank, wherever it is (before, the rank that found the mismatch
# first named the other side of its own comparison: the majority rank 0 where rank 2 differed).
def test_mismatch_is_raised_by_its_call_and_blames_the_minority():
    import actorcc
    world, rounds = 3, 50
    uids = [str(actorcc.UniqueId.create("127.0.0.1")) for _ in range(rounds)]
    res = run_ranks(world, error_workers.mismatch_rounds, uids, timeout=240)
    for r, (kind, out) in enumerate(res):
        assert kind == "ok", f"rank {r}: {kind} {out}"
    bad = []
    for r, (_, out) in enumerate(res):
        for i, (case, odd, warm, err) in enumerate(out):
            theirs, _ = error_workers.MISMATCHES[case]
            where = f"round {i} ({case}, odd rank {odd}), rank {r}"
            if warm is not None:
                bad.append(f"{where}: the matching warm-up failed: {warm}")
            elif err is None:
                bad.append(f"{where}: the mismatched call completed")
            else:
                secs, typ, culprit, msg = err
                if culprit != odd or f"rank {odd} called {theirs[0]}(" not in msg or secs >= 5:
                    bad.append(f"{where}: {typ} culprit {culprit} after {secs:.1f} s: {msg}")
    assert not bad, f"{len(bad)} of {world * rounds}:\n" + "\n".join(bad[:20])


def test_matching_calls_are_never_refused(uid):
    expect_no_failures(run_ranks(3, error_workers.matching_sequences, uid, timeout=120))


@pytest.mark.parametrize("case", error_workers.OVERLAP_CASES)
def test_overlapping_outputs_are_refused_by_address_range(case, uid):
    expect_no_failures(run_ranks(3, error_workers.overlapping_views, uid, case, timeout=60))


def test_check_synchronize_and_wait_report_the_groups_error(uid):
    expect_no_failures(run_ranks(2, error_workers.check_after_peer_abort, uid, timeout=60))


def test_checked_mode_names_both_calls(uid):
    res = run_ranks(3, error_workers.checked_mismatch, uid, expect_errors=True, timeout=60)
    for r, (kind, out) in enumerate(res):
        assert kind == "ok" and out is not None, f"rank {r}: {kind} {out}"
        msg, culprit = out
        assert culprit == 2, f"rank {r}: culprit {culprit}: {msg}"  # the odd rank, not the majority
        assert "checked mode" in msg and "ranks 0, 1 called all_reduce(count=4, float32, sum)" in msg, msg
        assert "rank 2 called all_reduce(count=8, float32, sum)" in msg, msg
