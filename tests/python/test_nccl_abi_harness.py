"""The device machine's harness for actorcc's libnccl.so.2 (tests/python/nccl_abi_workers.py),
checked on the CPU: the same torch cases over gloo must pass against the harness's own float64
references, so a failure on the device means the library, not the harness. What gloo lacks
(AVG on integers, PREMUL_SUM, float8) is printed as REFUSED there and checked only on GPUs."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("case,world", [("matrix", 3), ("train", 2), ("fresh", 2)])
def test_harness_passes_on_gloo(case, world, tmp_path):
    env = dict(os.environ, NCCLABI_BACKEND="gloo")

    def run(logdir):
        return subprocess.run([sys.executable, os.path.join(HERE, "nccl_abi_workers.py"), "--case", case, "--world",
                               str(world), "--no-preload", "--timeout", "200", "--logdir", str(logdir)],
                              capture_output=True, text=True, timeout=240, env=env)

    p = run(tmp_path / "first")
    if p.returncode != 0 and "exit -" in p.stdout and "FAIL rank" not in p.stdout:
        # A rank killed by a signal inside torch's gloo (no check failed: a wrong result prints
        # FAIL lines and exits 1) is torch's, not the harness's: once more, saying so.
        print("gloo run ended by a signal, run again:", p.stdout)
        p = run(tmp_path / "again")
    assert p.returncode == 0 and f"NCCLABI {case} world={world} mode=none: PASS" in p.stdout, p.stdout + p.stderr


def test_harness_catches_a_wrong_result(tmp_path):
    # a rank whose all_reduce result is off by one in one element must fail the case, naming it
    env = dict(os.environ, NCCLABI_BACKEND="gloo", NCCLABI_CORRUPT="1")
    p = subprocess.run([sys.executable, os.path.join(HERE, "nccl_abi_workers.py"), "--case", "matrix", "--world", "2",
                        "--no-preload", "--timeout", "200", "--logdir", str(tmp_path)],
                       capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 1 and "FAIL" in p.stdout and "all_reduce torch.float32 sum n=7" in p.stdout, p.stdout


@pytest.mark.parametrize("backend", ["gloo", "actorcc-api"])
def test_report_shape_script_on_cpu(backend, tmp_path):
    # bench/nccl_report_shape.py, the device's report-shape run, with CPU tensors: staggered
    # processes, every size checked, one verdict line and the JSON (actorcc-api: the baseline,
    # actorcc.Communicator with the id made by the launcher)
    script = os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench", "nccl_report_shape.py")
    out = tmp_path / "shape.json"
    p = subprocess.run([sys.executable, script, "--backend", backend, "--world", "2", "--max-bytes", "1M",
                        "--stagger", "0.1", "0.3", "--timeout", "150", "--json", str(out)],
                       capture_output=True, text=True, timeout=200, env=dict(os.environ, ACTORCC_LOG="info"))
    assert p.returncode == 0 and "REPORTSHAPE PASS world=2 wrong=0" in p.stdout, p.stdout + p.stderr
    import json
    res = json.loads(out.read_text())
    assert res["pass"] and [len(r["sizes"]) for r in res["ranks"]] == [3, 3]
    # counted from the last rank's entry into init, so never less than from its return
    assert res["last_arrival_to_first_result_s"] >= res["first_call_after_last_arrival_s"] > 0
    if backend == "actorcc-api":
        # each rank's ready line: stamped, with where its construction went
        import re
        ready = re.findall(r"\[actorcc INFO pid \d+ \d\d:\d\d:\d\d\.\d{6}\] rank (\d)/2 ready: backend cpu, .*; in "
                           r"([\d.]+) ms: local ([\d.]+), join ([\d.]+), setup ([\d.]+)", p.stderr)
        assert sorted(r[0] for r in ready) == ["0", "1"], p.stderr
        for _, total, *parts in ready:
            assert abs(float(total) - sum(map(float, parts))) < 0.5, ready
