"""Many local ranks on the CPU backend: the shared-memory segment grows as O(local ranks) (the
point-to-point channels are per-receiver inboxes, not one per ordered pair), and all_to_all
over every pair of 64 ranks stays exact (actorcc-bench checks every result and fails on a
wrong one). Uses bench/cpu_local_ranks.py's probe of a rank's mapping."""
from __future__ import annotations

import importlib.util
import os

from test_bench_cli import find_tool

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def local_ranks_module():
    spec = importlib.util.spec_from_file_location("cpu_local_ranks", os.path.join(ROOT, "bench", "cpu_local_ranks.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_64_local_ranks_segment_is_linear_and_all_to_all_exact(monkeypatch):
    bench = find_tool("actorcc-bench", "ACTORCC_BENCH")
    # A small workspace (two 32 KiB buffers per rank) makes the point-to-point part dominate:
    # one channel per ordered pair would take 64 x 36 KiB per rank here.
    monkeypatch.setenv("ACTORCC_WORKSPACE_BYTES", str(64 << 10))
    n = 64
    _, seg, rss = local_ranks_module().run_once(bench, n, 60, coll="all_to_all", maxbytes="64K")
    assert seg > 0, "no rank's actorcc shared-memory mapping was seen"
    # slots 64 KiB + an inbox of 8 channels of two 16 KiB chunks + flags: well under 1 MiB
    assert seg / n <= 1 << 20, f"segment of {seg} bytes for {n} local ranks: {seg // n} bytes per rank"
    assert len(rss) == n
