"""actorcc.launch: the no-Ray process launcher of the examples and scripts (one process per
GPU, CUDA_VISIBLE_DEVICES masked, staggered starts), on CPU processes."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

import actorcc
from actorcc.launch import host_gpu_count, run_per_gpu


def _report(rank, world, token):
    return {"rank": rank, "world": world, "token": token, "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "pid": os.getpid(), "started": time.time()}


def _fail_on_one(rank, world):
    if rank == 1:
        raise ValueError("rank one refuses")
    return rank


def _vanish_on_last(rank, world):
    if rank == world - 1:
        os._exit(7)
    return rank


def _all_reduce(rank, world, uid):
    comm = actorcc.Communicator(uid, rank, world, timeout=30)
    x = np.full(5, rank + 1, np.int64)
    comm.all_reduce(x)
    comm.close()
    return x.tolist()


def test_each_rank_sees_its_own_device_and_results_come_by_rank():
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    res = run_per_gpu(_report, 5, ("t",), devices=[3, 1, 2])
    assert [r["rank"] for r in res] == list(range(5))
    assert all(r["world"] == 5 and r["token"] == "t" for r in res)
    assert [r["visible"] for r in res] == ["3", "1", "2", "3", "1"]
    assert len({r["pid"] for r in res} | {os.getpid()}) == 6
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == before  # the launcher's own view is restored


def test_default_devices_and_stagger():
    # Rank r is started r * 1.5 s after rank 0: rank 2 runs about 3 s after rank 0, whereas
    # started together they run within an interpreter's start-up jitter of each other. The
    # bound (half the gap) leaves 1.5 s for that jitter on a loaded host.
    res = run_per_gpu(_report, 3, ("s",), stagger=1.5)
    assert [r["visible"] for r in res] == ["0", "1", "2"]
    started = [r["started"] for r in res]
    assert started[2] - started[0] >= 1.5, started


def test_a_failed_rank_is_named_with_its_traceback():
    with pytest.raises(RuntimeError) as e:
        run_per_gpu(_fail_on_one, 3)
    msg = str(e.value)
    assert msg.startswith("rank 1: rank one refuses") and "ValueError" in msg
    assert "rank 0" not in msg and "rank 2" not in msg


def test_a_rank_that_dies_silently_is_named_with_its_exit_code():
    with pytest.raises(RuntimeError, match=r"rank 2: the process ended \(exit code 7\)"):
        run_per_gpu(_vanish_on_last, 3)


def test_the_ranks_form_a_group_whose_root_runs_in_the_launcher():
    uid = str(actorcc.UniqueId.create("127.0.0.1"))
    res = run_per_gpu(_all_reduce, 3, (uid,), stagger=0.2)
    assert res == [[6] * 5] * 3


def test_host_gpu_count_falls_back_without_nvidia_smi(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert host_gpu_count(default=4) == 4
