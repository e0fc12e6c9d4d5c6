"""The CPU examples a new user runs first (examples/): they must run, check their own results
and say so. The GPU example (ray_allreduce_sweep.py) runs on the device machine."""
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")


def run_example(name, *args, timeout=180):
    p = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, f"rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


@pytest.mark.parametrize("world", [2, 4])
def test_cpu_collectives_example(world):
    p = run_example("cpu_collectives.py", "--world", str(world), "--stagger", "0.1")
    checked = [line for line in p.stdout.splitlines() if line.endswith("results checked")]
    assert sorted(line.split("/")[0] for line in checked) == [f"rank {r}" for r in range(world)], p.stdout
    assert f"{world} ranks, every collective checked" in p.stdout


@pytest.mark.ray
def test_ray_cpu_example():
    pytest.importorskip("ray")
    p = run_example("ray_cpu_collectives.py", "--world", "3", timeout=300)
    assert p.stdout.count("reduce_scatter, all_gather, broadcast, barrier checked") == 3, p.stdout
    assert p.stdout.count("ray.util.collective allreduce, broadcast, barrier checked") == 3, p.stdout
    assert "3 Ray actors, both APIs checked" in p.stdout
    assert "disconnected without leaving" not in p.stderr, p.stderr  # ray.shutdown() ends the groups cleanly


@pytest.mark.ray
def test_elastic_weight_sync_example():
    # The RL case of docs/elastic.md: an inference actor dies mid-broadcast, the others shrink and
    # finish the sync, Ray restarts it, it rejoins and gets the current weights, bit for bit.
    pytest.importorskip("ray")
    p = run_example("elastic_weight_sync.py", timeout=240)
    out = p.stdout
    assert "step 1: inference 1 died in the sync" in out, out
    for who in ("trainer", "inference 0", "inference 2"):  # each survivor named rank 2 and went on
        assert f"step 1: {who} got RemoteError (culprit rank 2)" in out, out
        assert f"step 1: {who} synced as rank" in out and "of 3 (members, by original rank: [0, 1, 3])" in out, out
    assert "step 1: inference 1 restarted by Ray" in out and "asked to rejoin: True" in out, out
    for step in (2, 3):
        for r, who in enumerate(("trainer", "inference 0", "inference 1", "inference 2")):
            assert f"step {step}: {who} synced as rank {r} of 4 (members, by original rank: [0, 1, 2, 3])" in out, out
    assert "every actor's weights equal the trainer's bit for bit after every step" in out, out


def test_weight_sync_example():
    pytest.importorskip("torch")
    p = run_example("weight_sync.py", "--trainers", "2", "--inference", "2", timeout=400)
    synced = [line for line in p.stdout.splitlines() if line.endswith("weights equal to the trainers'")]
    assert [line.split(" (")[0] for line in synced] == [f"rank {r}" for r in range(4)], p.stdout
    assert all("3 steps, 4 buckets per sync" in line for line in synced), p.stdout
    assert "2 trainers -> 2 inference ranks: weights synced and checked" in p.stdout
