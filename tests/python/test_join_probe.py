"""bench/join_probe.py on the CPU backend: ranks joining through actorcc's libnccl.so.2 with the
root in rank 0 or in the launcher, made just before or a second before; every trial's figures
present and consistent, the sampler's waits of ranks 0 and 1, and a rank that dies is named rather
than waited for."""
import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench",
                      "join_probe.py")


@pytest.mark.parametrize("root", ["rank0-jit", "rank0-early", "launcher-jit", "launcher-early"])
def test_probe_reports_every_trial(root, tmp_path, nccl_lib):
    out = tmp_path / "probe.json"
    p = subprocess.run([sys.executable, SCRIPT, "--lib", nccl_lib, "--world", "3", "--root", root, "--trials", "2",
                        "--timeout", "60", "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    got = json.loads(out.read_text())
    assert got["root"] == root and got["world"] == 3 and len(got["trials"]) == 2
    for t in got["trials"]:
        assert len(t["init_ms"]) == 3 and len(t["join_ms"]) == 3 and len(t["threads"]) == 3, t
        for init, join in zip(t["init_ms"], t["join_ms"]):
            # the join is a part of the init, read from the rank's own ready line
            assert join is not None and 0 <= join <= init + 0.1, t
        assert t["all_done_ms"] + 0.5 >= max(t["init_ms"]), t
        for rows in t["threads"]:
            assert rows and all(len(r) == 3 and r[0] >= 0 and r[1] >= 0 for r in rows), rows


def test_sampler_lists_the_joining_threads_waits(tmp_path, nccl_lib):
    out = tmp_path / "probe.json"
    p = subprocess.run([sys.executable, SCRIPT, "--lib", nccl_lib, "--world", "3", "--trials", "2", "--sample", "80",
                        "--timeout", "60", "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    for t in json.loads(out.read_text())["trials"]:
        assert len(t["waits"]) == 2, t  # ranks 0 and 1
        for rows in t["waits"]:
            # the main thread spends the join (milliseconds on the CPU backend) on a CPU or waiting
            assert any(r[0] == "main" for r in rows), rows
            for who, start, ms, state, what in rows:
                assert ms >= 1 or state == "D", rows
                # a run may begin in the sampler's lead-in before the joins (the main thread
                # waiting on its pipe for GO): 0.1 s there was once exceeded on a loaded machine
                assert state in "RSDTtZ" and what and start > -1000, rows


def test_a_rank_that_dies_is_named(tmp_path, nccl_lib):
    # rank 1's process exits before its first join: the probe stops within its timeout, naming it
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    (tmp_path / "sitecustomize.py").write_text(
        "import os, sys\n"
        "if '--rank' in sys.argv and sys.argv[sys.argv.index('--rank') + 1] == '1':\n"
        "    os._exit(3)\n")
    p = subprocess.run([sys.executable, SCRIPT, "--lib", nccl_lib, "--world", "2", "--trials", "1", "--timeout", "20"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode != 0 and "rank 1 exited or did not answer" in p.stderr, p.stdout + p.stderr
