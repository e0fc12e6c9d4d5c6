"""bench/first_call_split.py: a report-shape run's time from the last arrival to the first
result, split into the caller's steps and actorcc's from the run's JSON and the ranks' info lines.
A log made here with known times must give exactly those spans (the library's shape: lazy
creation inside torch's first call, the first-call line); a run of the script on the CPU (the
API's shape) must give spans that add up to the whole; a log without a rank's line is refused."""
import datetime
import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPLIT = os.path.join(ROOT, "bench", "first_call_split.py")
SHAPE = os.path.join(ROOT, "bench", "nccl_report_shape.py")
spec = importlib.util.spec_from_file_location("first_call_split", SPLIT)
fcs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fcs)


def stamp(t):
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return d.strftime("%H:%M:%S.%f")


def library_run(t0, world=2):
    """A run shaped as the library's under torch, times in ms from the last arrival t0: init
    returns at 3, tensors at 9, construction 10-16 (rank r enters at 10 - r, ready at 16 - r / 2),
    the first call reaches the library at 21 and 22, first results at 35 and 34."""
    ranks, lines = [], []
    for r in range(world):
        ranks.append({"rank": r, "init_entered": t0 - (world - 1 - r) * 0.5, "init_done": t0 + 0.003,
                      "first_tensor_s": 0.006, "first_done": t0 + (0.035 if r == 0 else 0.034)})
        ready, took = t0 + (16 - r / 2) / 1e3, (16 - r / 2) - (10 - r)
        lines.append(f"[actorcc INFO pid {100 + r} {stamp(ready)}] rank {r}/{world} ready: backend cuda, 1 node(s), "
                     f"local rank {r} of {world}; in {took:.1f} ms: local 0.1, join 0.5, setup {took - 0.6:.1f}")
        lines.append(f"[actorcc INFO pid {100 + r} {stamp(t0 + (21 + r) / 1e3)}] ncclAllReduce: rank {r} of {world}: "
                     f"the communicator's first call, 5.0 ms after its init returned")
    # a sub-group's lines (another world size) are not this run's
    lines.append(f"[actorcc INFO pid 100 {stamp(t0 + 0.050)}] rank 0/1 ready: backend cuda, 1 node(s), local rank 0 "
                 f"of 1; in 40.0 ms: local 0.1, join 0.5, setup 39.4")
    return {"world": world, "ranks": ranks}, "\n".join(lines) + "\n"


def test_spans_of_a_library_run_are_exact():
    run, log = library_run(1_796_527_645.25)
    s = fcs.split(run, log)
    assert s["last_arrival_to_first_result_ms"] == pytest.approx(35, abs=0.01)
    sp = s["spans_ms"]
    assert sp["caller_before_construction"] == pytest.approx(10, abs=0.01)  # the later rank's entry
    assert sp["construction"] == pytest.approx(6, abs=0.01)  # to the later ready line
    assert sp["caller_after_construction"] == pytest.approx(6, abs=0.01)  # to the later first call
    assert sp["first_call_to_result"] == pytest.approx(13, abs=0.01)
    assert sum(sp.values()) == pytest.approx(35, abs=0.05)
    assert list(s["milestones_ms"]) == ["init_returned", "first_tensor_made", "construction_began",
                                        "construction_done", "library_called", "first_result"]
    assert s["per_rank"]["1"] == {"construction_ms": pytest.approx(6.5, abs=0.01),
                                  "library_called_ms": pytest.approx(22, abs=0.01)}


def test_times_of_day_line_up_across_midnight():
    # the last arrival 5 ms before midnight UTC: the lines after midnight are the next day's
    t0 = datetime.datetime(2026, 12, 6, tzinfo=datetime.timezone.utc).timestamp() - 0.005
    run, log = library_run(t0)
    sp = fcs.split(run, log)["spans_ms"]
    assert sp["caller_before_construction"] == pytest.approx(10, abs=0.01)
    assert sp["first_call_to_result"] == pytest.approx(13, abs=0.01)


def test_a_missing_rank_is_refused(tmp_path):
    run, log = library_run(1_796_527_645.25)
    log = "\n".join(l for l in log.splitlines() if "rank 1/2 ready" not in l)
    with pytest.raises(ValueError, match=r"rank\(s\) \[1\] of 2"):
        fcs.split(run, log)
    (tmp_path / "run.json").write_text(json.dumps(run))
    (tmp_path / "run.log").write_text(log)
    p = subprocess.run([sys.executable, SPLIT, "--json", str(tmp_path / "run.json"), "--log", str(tmp_path / "run.log")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "ACTORCC_LOG=info" in p.stderr


def test_a_cpu_run_of_the_api_adds_up(tmp_path):
    pytest.importorskip("torch")
    out, log = tmp_path / "shape.json", tmp_path / "shape.log"
    with open(log, "w") as err:
        p = subprocess.run([sys.executable, SHAPE, "--backend", "actorcc-api", "--world", "3", "--max-bytes", "4K",
                            "--stagger", "0.1", "0.2", "--timeout", "150", "--json", str(out)], stdout=subprocess.PIPE,
                           stderr=err, text=True, timeout=200, env=dict(os.environ, ACTORCC_LOG="info"))
    assert p.returncode == 0, p.stdout + log.read_text()
    split_out = tmp_path / "split.json"
    q = subprocess.run([sys.executable, SPLIT, "--json", str(out), "--log", str(log), "--out", str(split_out)],
                       capture_output=True, text=True, timeout=60)
    assert q.returncode == 0 and "last arrival -> first result" in q.stdout, q.stdout + q.stderr
    s = json.loads(split_out.read_text())
    sp = s["spans_ms"]
    # the API constructs inside its init call: nothing of the caller's comes before the last
    # rank's construction but its own local steps, and the spans add up to the whole
    assert all(v >= -0.5 for v in sp.values()), sp
    assert sp["caller_before_construction"] < 50 and sp["construction"] > 0, sp
    assert sum(sp.values()) == pytest.approx(s["last_arrival_to_first_result_ms"], abs=0.5)
    assert sorted(s["per_rank"]) == ["0", "1", "2"]
    assert "library_called" not in s["milestones_ms"]  # no libnccl.so.2 in this run
