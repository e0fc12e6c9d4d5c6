"""bench/torch_bench.py on CPU tensors (actorcc against gloo, 2 processes, two sizes, two trials in
rotating order): it runs, checks its results, and writes its JSON (the trials' median, range and
values, the trial-by-trial ratios of actorcc to gloo, and each variant's first call after
init_process_group) and plot. Skipped where torch is not installed."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench", "torch_bench.py")


def test_cpu_run_writes_json_and_plot(tmp_path):
    out = subprocess.run([sys.executable, BENCH, "--device", "cpu", "--worlds", "2", "-b", "4K", "-e", "64K",
                          "-n", "20", "-r", "1", "--trials", "2", "--timeout", "60", "--variant-timeout", "120", "-o", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "world 2: time per dist.all_reduce call" in out.stdout
    doc = json.loads((tmp_path / "torch_bench.json").read_text())
    assert doc["meta"]["schema"] == "actorcc-torch-bench/1" and not doc["notes"], doc["notes"]
    got = {(r["variant"], r["bytes"]) for r in doc["rows"]}
    assert got == {(v, b) for v in ("actorcc", "gloo") for b in (4096, 65536)}, got
    for r in doc["rows"]:
        assert r["world"] == 2 and r["sync_us"] > 0 and r["async_us"] > 0, r
        assert ("raw_us" in r) == (r["variant"] == "actorcc"), r
        assert r["trials"] == 2, r
        for m in ("sync", "async"):
            lo, hi = r[m + "_range_us"]
            assert lo <= r[m + "_us"] <= hi, r
            assert len(r[m + "_trials_us"]) == 2 and lo == min(r[m + "_trials_us"]), r
    check_first_calls(doc, out.stdout, 2)
    us = {(r["variant"], r["bytes"]): r for r in doc["rows"]}
    assert {(p["variant"], p["against"], p["bytes"]) for p in doc["pairs"]} == {
        ("actorcc", "gloo", b) for b in (4096, 65536)}, doc["pairs"]
    for p in doc["pairs"]:
        for m in ("sync", "async"):
            mine, theirs = us[("actorcc", p["bytes"])], us[("gloo", p["bytes"])]
            want = [a / b for a, b in zip(mine[m + "_trials_us"], theirs[m + "_trials_us"])]
            assert p[m]["ratios"] == pytest.approx(want), p
            assert p[m]["at_or_below_1"] == sum(x <= 1 for x in want), p
    try:
        import matplotlib  # noqa: F401  draws the plot; the JSON is written without it
    except ImportError:
        return
    assert (tmp_path / "torch_bench.png").stat().st_size > 0


def check_first_calls(doc, stdout, trials):
    """The first-call figures (the first call after init_process_group is
    where a lazily formed communicator is paid for): init, first and second call of each variant
    at the smallest size, the slowest rank's at or above the fastest's, printed."""
    assert "world 2: first dist.all_reduce after init_process_group (4 KB)" in stdout, stdout
    first = {e["variant"]: e for e in doc["first_calls"]}
    assert set(first) == {"actorcc", "gloo"}, doc["first_calls"]
    for e in first.values():
        assert e["world"] == 2 and e["bytes"] == 4096, e
        for key in ("init", "first", "second"):
            assert e[key + "_ms"] >= e[key + "_min_ms"] > 0, e
            assert len(e.get(key + "_trials_ms", [0])) == trials, e


def test_interleaved_run_pairs_round_by_round(tmp_path):
    """--interleave: both variants' ranks alive at once, taking turns; every figure the median of
    the rounds, the pairs compared round by round."""
    out = subprocess.run([sys.executable, BENCH, "--device", "cpu", "--worlds", "2", "-b", "4K", "-e", "64K",
                          "-n", "20", "-r", "3", "--interleave", "--timeout", "60", "--variant-timeout", "120",
                          "-o", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ratios round by round" in out.stdout, out.stdout
    doc = json.loads((tmp_path / "torch_bench.json").read_text())
    assert doc["meta"]["interleaved"] and not doc["notes"], doc["notes"]
    us = {(r["variant"], r["bytes"]): r for r in doc["rows"]}
    assert set(us) == {(v, b) for v in ("actorcc", "gloo") for b in (4096, 65536)}, set(us)
    for r in doc["rows"]:
        assert r["rounds"] == 3 and ("raw_us" in r) == (r["variant"] == "actorcc"), r
        for m in ("sync", "async"):
            assert len(r[m + "_rounds_us"]) == 3 and r[m + "_us"] > 0, r
    assert len(doc["pairs"]) == 2
    check_first_calls(doc, out.stdout, 1)
    for p in doc["pairs"]:
        mine, theirs = us[("actorcc", p["bytes"])], us[("gloo", p["bytes"])]
        for m in ("sync", "async"):
            want = [a / b for a, b in zip(mine[m + "_rounds_us"], theirs[m + "_rounds_us"])]
            assert p["rounds"] == 3 and p[m]["ratios"] == pytest.approx(want), p


def test_interleaved_rank_that_dies_or_stalls_is_named(tmp_path):
    """The interleaved driver's wait on a rank is bounded, and its error names the rank."""
    import importlib.util
    import time
    spec = importlib.util.spec_from_file_location("torch_bench", BENCH)
    tb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tb)
    dead = tb.Served(subprocess.Popen([sys.executable, "-c", "print('warming up'); raise SystemExit(3)"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE), "nccl rank 1")
    with pytest.raises(RuntimeError, match=r"^nccl rank 1 exited 3; output: warming up"):
        dead.expect("ready", time.monotonic() + 30)
    stalled = tb.Served(subprocess.Popen([sys.executable, "-c", "import time; print('@@other'); time.sleep(60)"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE), "actorcc rank 0")
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"^actorcc rank 0: no answer in time; output: @@other"):
        stalled.expect("ready", time.monotonic() + 1)
    assert time.monotonic() - t0 < 10
    stalled.proc.kill()
    stalled.proc.wait()
