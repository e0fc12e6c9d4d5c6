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
