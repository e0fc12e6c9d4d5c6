#!/usr/bin/env python3
"""CI test of actorcc-bench through its real command line, on the CPU backend (no GPU needed).

Runs short sweeps with several worker processes, checks the nccl-tests style table and the
JSON file (schema actorcc-bench/1), and checks that a failing, hanging or wrong worker makes
the benchmark exit non-zero naming the rank and the message size, leaving no process behind.

Registered with ctest as `bench_cli` (tools/bench/CMakeLists.txt):
    python3 tests/python/test_bench_cli.py --bench build/tools/bench/actorcc-bench
pytest also collects it (the binary then comes from $ACTORCC_BENCH or build*/tools/bench/).
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BENCH = None

ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s*$")


def find_tool(name, env_var):
    """The binary $env_var names, else the newest build*/tools/bench/<name>; under pytest a
    missing one skips the test."""
    cand = os.environ.get(env_var)
    if not cand:
        found = sorted(glob.glob(os.path.join(ROOT, "build*", "tools", "bench", name)), key=os.path.getmtime)
        cand = found[-1] if found else None
    if not cand or not os.access(cand, os.X_OK):
        try:
            import pytest

            pytest.skip(f"{name} is not built (set {env_var})")
        except ImportError:
            raise SystemExit(f"{name} not found: pass --bench PATH or set {env_var}")
    return cand


def bench():
    global BENCH
    if not BENCH:
        BENCH = find_tool("actorcc-bench", "ACTORCC_BENCH")
    return BENCH


def scratch():
    """A temporary folder for one run, removed when the `with` block ends (a plain mkdtemp
    left one bench-cli-* folder per run behind in the temp directory)."""
    return tempfile.TemporaryDirectory(prefix="bench-cli-")


def run(args, timeout=120, tmp=None):
    """Runs the benchmark with its own TMPDIR, so its workers can be found by their --run-dir.
    Without `tmp` the run gets a scratch folder of its own, removed before this returns
    (p.tmp still names it, for leftover_workers)."""
    if tmp is None:
        with scratch() as own:
            return run(args, timeout, own)
    env = dict(os.environ, TMPDIR=tmp, ACTORCC_SOCKET_ADDR="127.0.0.1")  # loopback only
    env.pop("ACTORCC_ALGO", None)
    t0 = time.time()
    p = subprocess.run([bench()] + args, capture_output=True, text=True, timeout=timeout, env=env)
    p.elapsed = time.time() - t0
    p.tmp = tmp
    return p


def leftover_workers(tmp):
    """Processes still running from this run (their --run-dir lies under tmp)."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "--worker" in line and tmp in line]


def rows_of(stdout):
    return [m.groups() for m in (ROW.match(line) for line in stdout.splitlines()) if m]


def show(p):
    return f"rc={p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"


def test_cpu_sweep_table_and_json():
    with scratch() as tmp:
        cpu_sweep_table_and_json(tmp)


def cpu_sweep_table_and_json(tmp):
    out = os.path.join(tmp, "out.json")
    p = run(["--ranks", "3", "-b", "1K", "-e", "64K", "-f", "4", "-n", "5", "-w", "2", "--stagger", "0.2",
             "-J", out, "--no-plot"], tmp=tmp)
    assert p.returncode == 0, show(p)
    header = [line for line in p.stdout.splitlines() if "#wrong" in line]
    assert header, show(p)
    for word in ("size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong"):
        assert word in header[0], header[0]
    rows = rows_of(p.stdout)
    assert [int(r[0]) for r in rows] == [1024, 4096, 16384, 65536], show(p)
    for size, count, typ, redop, t, algbw, busbw, wrong, p50, p99 in rows:
        assert int(count) == int(size) // 4 and typ == "float" and redop == "sum"
        assert float(t) > 0 and int(wrong) == 0
    assert "init" in p.stdout and "first 4 KB call" in p.stdout
    assert not leftover_workers(tmp)

    with open(out) as f:
        data = json.load(f)
    assert data["schema"] == "actorcc-bench/1"
    for key in ("gpus", "driver", "cuda", "nccl", "links"):
        assert key in data["machine"], key
    assert data["machine"]["links"] == "cpu"
    s = data["settings"]
    for key in ("launch", "coll", "dtype", "op", "ranks", "nodes", "graph", "permute", "stagger_s"):
        assert key in s, key
    assert s["launch"] == "actors" and s["coll"] == "all_reduce" and s["ranks"] == 3 and s["nodes"] == 1
    assert s["check"] is True and "hashed" in s["check_scheme"] and "after every timed phase" in s["check_scheme"]
    assert s["graph"] is False and s["graph_launches"] == 0 and s["permute"] is False and abs(s["stagger_s"] - 0.2) < 1e-9
    assert [peer["rank"] for peer in data["peers"]] == [0, 1, 2]
    assert len(data["results"]) == 1
    res = data["results"][0]
    assert res["impl"] == "actorcc"
    assert res["startup"]["init_ms"] >= 0 and res["startup"]["first_op_ms"] > 0
    assert [r["bytes"] for r in res["rows"]] == [1024, 4096, 16384, 65536]
    for r in res["rows"]:
        for key in ("bytes", "count", "time_us", "p50_us", "p99_us", "algbw", "busbw", "wrong"):
            assert key in r, key
        assert r["wrong"] == 0 and r["time_us"] > 0 and r["p99_us"] >= r["p50_us"] > 0
        assert r["algo"] in ("shm_oneshot", "shm_twoshot"), r  # what the planner ran
        assert abs(r["algbw"] - r["bytes"] / r["time_us"] / 1e3) <= 1e-3 * r["algbw"] + 1e-9
        assert abs(r["busbw"] - r["algbw"] * 2 * 2 / 3) <= 1e-3 * r["busbw"] + 1e-9  # 2(n-1)/n


def test_other_collectives_and_modes():
    cases = [
        (["--coll", "reduce_scatter", "-d", "half", "-o", "max"], 2 / 3),
        (["--coll", "all_gather", "-d", "int32", "--inplace", "--launch", "torchrun"], 2 / 3),
        (["--coll", "broadcast", "-d", "bfloat16", "-r", "2", "--order", "random", "--seed", "7"], 1.0),
        (["-d", "int8", "-o", "prod", "--inplace"], 4 / 3),
        (["--coll", "send_recv", "-d", "int64"], 1.0),
        (["--coll", "all_to_all", "-d", "half"], 2 / 3),
    ]
    for extra, factor in cases:
        with scratch() as tmp:
            out = os.path.join(tmp, "r.json")
            p = run(["--ranks", "3", "-b", "3K", "-e", "48K", "-f", "4", "-n", "3", "-w", "1", "--stagger", "0",
                     "-J", out, "--no-plot"] + extra, tmp=tmp)
            assert p.returncode == 0, show(p)
            with open(out) as f:
                data = json.load(f)
        rows = data["results"][0]["rows"]
        assert len(rows) == 3 and all(r["wrong"] == 0 for r in rows), show(p)
        for r in rows:
            assert abs(r["busbw"] - r["algbw"] * factor) <= 1e-3 * r["busbw"] + 1e-9, (extra, r)


def test_worker_failure_names_rank():
    p = run(["--ranks", "3", "-b", "1K", "-e", "64K", "-n", "3", "-w", "1", "--stagger", "0",
             "--inject-fail", "1", "--no-plot"])
    assert p.returncode != 0, show(p)
    assert re.search(r"FAILED: rank 1 failed \(exit code 1\) during '[^']*4096 B", p.stderr), show(p)
    assert not leftover_workers(p.tmp), show(p)


def test_wrong_data_names_rank_and_size():
    p = run(["--ranks", "3", "-b", "1K", "-e", "64K", "-n", "3", "-w", "1", "--stagger", "0",
             "--inject-wrong", "2@16K", "--no-plot"])
    assert p.returncode == 3, show(p)
    assert re.search(r"WRONG RESULTS: actorcc all_reduce 16384 B: rank 2: \d+ wrong", p.stderr), show(p)
    wrong = {int(r[0]): int(r[7]) for r in rows_of(p.stdout)}
    assert wrong[16384] > 0 and wrong[1024] == 0, show(p)


def test_wrong_data_in_the_new_collectives_is_seen():
    # The ring and the exchange are checked like the others: a corrupted output is counted.
    for coll in ("send_recv", "all_to_all"):
        p = run(["--ranks", "3", "-b", "3K", "-e", "48K", "-f", "4", "-n", "3", "-w", "1", "--stagger", "0",
                 "--coll", coll, "--inject-wrong", "1@12K", "--no-plot"])
        assert p.returncode == 3, show(p)
        assert re.search(rf"WRONG RESULTS: actorcc {coll} 12288 B: rank 1: \d+ wrong", p.stderr), show(p)


def test_hang_is_bounded():
    p = run(["--ranks", "3", "-b", "1K", "-e", "64K", "-n", "3", "-w", "1", "--stagger", "0",
             "--inject-hang", "2", "--timeout", "3", "--no-plot"], timeout=60)
    assert p.returncode != 0, show(p)
    assert "rank 2" in p.stderr and "4096 B" in p.stderr, show(p)
    assert p.elapsed < 40, p.elapsed
    assert not leftover_workers(p.tmp), show(p)


def test_runs_leave_no_scratch_folders():
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "bench-cli-*")))
    p = run(["--ranks", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--stagger", "0", "--no-plot"])
    assert p.returncode == 0, show(p)
    assert not os.path.exists(p.tmp), p.tmp
    with scratch() as tmp:
        p = run(["--ranks", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--stagger", "0", "--no-plot",
                 "-J", os.path.join(tmp, "r.json")], tmp=tmp)
        assert p.returncode == 0 and os.path.exists(os.path.join(tmp, "r.json")), show(p)
    assert not os.path.exists(tmp)
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "bench-cli-*"))) <= before


def test_usage_errors():
    p = run(["--no-such-flag"])
    assert p.returncode == 2 and "unknown flag" in p.stderr, show(p)
    p = run(["-b", "1X"])
    assert p.returncode == 2, show(p)
    p = run(["--help"])
    assert p.returncode == 0 and "--launch" in p.stdout and "-G" in p.stdout, show(p)
    p = run(["--ranks", "2", "--backend", "cpu", "--impl", "actorcc,nccl", "--no-plot"])
    assert p.returncode == 2 and "NCCL" in p.stderr, show(p)


def main():
    global BENCH
    args = sys.argv[1:]
    if "--bench" in args:
        BENCH = os.path.abspath(args[args.index("--bench") + 1])
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    passed = failed = 0
    for name, fn in tests:
        t0 = time.time()
        try:
            fn()
            passed += 1
            print(f"PASS {name} ({time.time() - t0:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001 - report every failure
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
