"""send/recv, batches, all_to_all(_v), reduce, gather, scatter through the Python API, 2-4
ranks in spawned processes on the CPU backend (numpy; torch too where it is installed)."""
import importlib.util
import random
import time

import pytest

import actorcc
import p2p_workers
import workers
from mp_helpers import expect_no_failures, run_ranks

HAVE_TORCH = importlib.util.find_spec("torch") is not None


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_call_dtype_size(world, uid):
    seed = random.getrandbits(32)  # fresh inputs every run; printed on failure
    sizes = p2p_workers.SIZES if world < 4 else [0, 1, 7, 1001]
    res = run_ranks(world, p2p_workers.p2p_matrix, uid, seed, sizes, HAVE_TORCH, timeout=300)
    expect_no_failures(res, f" (seed {seed})")


# The same across virtual nodes (one ACTORCC_NODE_ID letter per rank): the CPU backend's
# hierarchical path, shm inside a node and TCP between, in one batch.
@pytest.mark.parametrize("nodes", ["abab"])
def test_every_call_across_virtual_nodes(nodes, uid):
    seed = random.getrandbits(32)
    res = run_ranks(len(nodes), p2p_workers.p2p_matrix, uid, seed, [0, 1, 7, 1001], HAVE_TORCH, timeout=300,
                    env=lambda r: {"ACTORCC_NODE_ID": nodes[r]})
    expect_no_failures(res, f" (seed {seed}, nodes {nodes})")


def test_mismatched_sizes_across_virtual_nodes_fail_naming_both(uid):
    res = run_ranks(3, p2p_workers.mismatched_recv, uid, expect_errors=True, timeout=60,
                    env=lambda r: {"ACTORCC_NODE_ID": "abc"[r]})
    kind, info = res[1]
    assert kind == "err" and info["type"] == "InvalidArgumentError", res[1]
    assert "rank 1 expects 12 float32" in info["msg"] and "rank 0 sent 10 float32" in info["msg"], info["msg"]
    # Over TCP rank 0's send completes once the kernel holds it, so rank 0 may finish first;
    # rank 2, which took no part, fails its barrier instead of hanging.
    assert res[2][0] == "err", res[2]


def test_async_op(uid):
    expect_no_failures(run_ranks(3, p2p_workers.async_calls, uid))


def test_bad_arguments_before_anything_moves_and_the_other_rank_learns():
    # one group per bad call: the refusal aborts it (workers.refused_everywhere)
    uids = [actorcc.UniqueId.create("127.0.0.1") for _ in p2p_workers.bad_argument_cases(2)]
    expect_no_failures(run_ranks(2, workers.refused_everywhere, uids, p2p_workers.bad_argument_cases))


def test_mismatched_sizes_fail_on_both_ranks_naming_them(uid):
    t0 = time.monotonic()
    res = run_ranks(3, p2p_workers.mismatched_recv, uid, expect_errors=True, timeout=60)
    assert time.monotonic() - t0 < 30
    kind, info = res[1]
    assert kind == "err" and info["type"] == "InvalidArgumentError", res[1]
    assert "rank 1 expects 12 float32" in info["msg"] and "rank 0 sent 10 float32" in info["msg"], info["msg"]
    # The sender learns it from whichever rank tells it first (the shm abort word or a peer's
    # abort relayed by the root), so its culprit varies; the cause is always in the message.
    kind, info = res[0]
    assert kind == "err" and info["type"] == "RemoteError", res[0]
    assert "mismatched" in info["msg"] and "rank 1 expects 12 float32" in info["msg"], info["msg"]
    # rank 2 took no part: its barrier fails (the group is poisoned) instead of hanging
    assert res[2][0] == "err", res[2]


def test_checked_all_to_all_v_counts_fail_on_every_rank(uid):
    for kind, (err, after) in run_ranks(3, p2p_workers.mismatched_all_to_all_v_checked, uid, timeout=60):
        assert kind == "ok"
        assert err and "rank 1 sends 2 elements to rank 0, which expects 3" in err, err
        assert after, "a call after the refused one ran on the aborted group"


def test_more_senders_than_inbox_channels(uid):
    # 12 ranks: 11 senders to rank 0, whose inbox has 8 channels; a sender's one batch is
    # received over two calls, and all_to_all crosses every pair.
    seed = random.getrandbits(32)
    res = run_ranks(12, p2p_workers.many_senders, uid, seed, timeout=120)
    expect_no_failures(res, f" (seed {seed})")
