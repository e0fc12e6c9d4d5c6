"""bench/table.py and bench/plot.py on the folders the benchmark writes: a GPU run folder
(scripts/device.sh bench: <run>/bench/*-actors-eager.json ...), the folder scripts/bench.sh fills
(bench/results/local/<date>-<host>.json), and single JSON files."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(ROOT, "bench", "table.py")
PLOT = os.path.join(ROOT, "bench", "plot.py")
sys.path.insert(0, os.path.join(ROOT, "bench"))


def bench_doc(times, impls=("actorcc",), ranks=4, gpus=()):
    """An actorcc-bench/1 document with one row per (bytes, time_us) of `times`; every other
    implementation twice as slow."""
    results = []
    for k, impl in enumerate(impls):
        rows = [{"bytes": b, "count": b // 4, "time_us": t * (k + 1), "p50_us": t, "p99_us": t, "algbw": b / t / 1e3,
                 "busbw": b / t / 1e3 * 1.5, "wrong": 0, "algo": "shm_oneshot"} for b, t in times]
        results.append({"impl": impl, "rows": rows, "startup": {"init_ms": 11.0, "first_op_ms": 0.2}})
    return {"schema": "actorcc-bench/1", "machine": {"gpus": list(gpus), "nccl": "none", "links": "cpu"},
            "settings": {"coll": "all_reduce", "dtype": "float", "op": "sum", "ranks": ranks, "graph": False,
                         "launch": "actors"}, "results": results}


def write(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)
    return str(path)


def run(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)


def test_table_accepts_the_local_folder_of_bench_sh(tmp_path):
    # "no actors-eager / actors-graph JSON under bench/" for the user's own run
    local = tmp_path / "local"
    local.mkdir()
    write(local / "20261201-100000-host.json", bench_doc([(1024, 50.0)]))
    write(local / "20261201-110000-host.json", bench_doc([(1024, 40.0), (3 << 20, 900.0)], ("actorcc", "nccl")))
    (local / "20261201-110000-host.png").write_bytes(b"")  # not JSON: ignored
    p = run(TABLE, str(local))
    assert p.returncode == 0, p.stderr
    assert "20261201-110000-host.json" in p.stdout and "newest of 2 runs" in p.stdout, p.stdout
    assert "| 1 K | 40.00 (" in p.stdout and "| 3 M | 900.00 (" in p.stdout, p.stdout
    assert "| 0.50 |" in p.stdout  # actorcc / the faster other implementation
    p = run(TABLE, str(local / "20261201-100000-host.json"))  # a single file
    assert p.returncode == 0 and "| 1 K | 50.00 (" in p.stdout and "newest" not in p.stdout, p.stdout + p.stderr


def test_table_still_reads_gpu_run_folders_and_names_what_is_missing(tmp_path):
    runs = os.path.join(ROOT, "bench", "results")
    gpu_run = next((os.path.join(runs, d) for d in sorted(os.listdir(runs), reverse=True)
                    if os.path.isfile(os.path.join(runs, d, "bench", f"{d[:10]}-NVIDIA_H200-x2-actors-eager.json"))),
                   None)
    if gpu_run:
        p = run(TABLE, gpu_run)
        assert p.returncode == 0 and "| bar |" in p.stdout and "NCCL eager" in p.stdout, p.stdout + p.stderr
    p = run(TABLE, str(tmp_path))
    assert p.returncode != 0 and "no actorcc-bench JSON" in p.stderr, p.stderr


def test_plot_legend_on_both_panels_and_readable_log_labels(tmp_path):
    pytest.importorskip("matplotlib")
    import plot

    sizes = [1 << e for e in range(10, 31, 2)]  # 1K .. 1G
    doc = bench_doc([(b, 3.0 + b / 3e5) for b in sizes], ("actorcc", "nccl"), ranks=2, gpus=["NVIDIA H200"] * 2)
    fig = plot.draw([("x.json", doc)])
    fig.canvas.draw()
    for ax in fig.axes:
        leg = ax.get_legend()
        assert leg is not None and [t.get_text() for t in leg.get_texts()] == ["actorcc", "nccl"], ax.get_title()
        xl = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert xl[0] == "1K" and xl[-1] == "1G" and len(xl) <= 8, xl
    yl = [t.get_text() for t in fig.axes[1].get_yticklabels() if t.get_text()]
    assert yl and all(t.endswith((" us", " ms", " s")) for t in yl), yl  # no 10^n mathtext
    assert plot.fmt_us(20) == "20 us" and plot.fmt_us(2000) == "2 ms" and plot.fmt_us(2.5e6) == "2.5 s"
    assert plot.size_ticks(1024, 1 << 20) == [1 << e for e in range(10, 21, 2)]
    # the command line takes the local folder too, writing the PNG named by -o
    local = tmp_path / "local"
    local.mkdir()
    write(local / "20261201-110000-host.json", bench_doc([(1024, 40.0), (4096, 45.0)]))
    p = run(PLOT, str(local), "-o", str(tmp_path / "out.png"))
    assert p.returncode == 0 and (tmp_path / "out.png").stat().st_size > 10000, p.stderr
