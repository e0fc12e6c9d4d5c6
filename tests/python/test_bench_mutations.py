#!/usr/bin/env python3
"""The bench's exact check must catch real bugs on the whole path (fill, call, checked call after
every timed phase, gather, report, exit code), not only in its unit test: actorcc-bench-mutations
is the CPU-backend bench linked with the test-only library whose all-reduce carries the bugs of
src/common/mutation.hpp (a reduced tile stored 16 bytes late, the last rank's contribution left
out, fp16/bf16 partial sums rounded after every fold). Each must give wrong results, counted
per rank and size, and the run must fail; the same binary without a mutation must pass.

Registered with ctest as `bench_cpu_mutations` (tools/bench/CMakeLists.txt):
    python3 tests/python/test_bench_mutations.py --bench build/tools/bench/actorcc-bench-mutations
pytest also collects it (the binary then comes from $ACTORCC_BENCH_MUTATIONS or build*/tools/bench/).
"""
import json
import os
import sys

import test_bench_cli as cli

BENCH = None


def bench():
    global BENCH
    if not BENCH:
        BENCH = cli.find_tool("actorcc-bench-mutations", "ACTORCC_BENCH_MUTATIONS")
    return BENCH


def run_mutated(mutation, dtype, tmp):
    """3 ranks, 64 KiB-1 MiB of all_reduce sum (the one-shot and the two-shot shm routes)."""
    out = os.path.join(tmp, f"{mutation}-{dtype}.json")
    old, cli.BENCH = cli.BENCH, bench()
    os.environ["ACTORCC_TEST_MUTATION"] = mutation
    try:
        p = cli.run(["--ranks", "3", "-b", "64K", "-e", "1M", "-f", "4", "-n", "3", "-w", "1", "--stagger", "0",
                     "-d", dtype, "-o", "sum", "-J", out, "--no-plot"], timeout=180)
    finally:
        os.environ.pop("ACTORCC_TEST_MUTATION", None)
        cli.BENCH = old
    rows = []
    if os.path.exists(out):
        with open(out) as f:
            rows = json.load(f)["results"][0]["rows"]
    return p, rows


def test_unmutated_passes_and_every_mutation_is_reported():
    cases = [("none", "half"), ("none", "float"), ("shift_tile", "float"), ("drop_rank", "float"),
             ("drop_rank", "half"), ("half_acc", "half"), ("half_acc", "bfloat16")]
    with cli.scratch() as tmp:
        for mutation, dtype in cases:
            p, rows = run_mutated(mutation, dtype, tmp)
            wrong = sum(r["wrong"] for r in rows)
            print(f"{mutation:10} {dtype:8} exit {p.returncode}, {wrong} wrong elements over {len(rows)} sizes")
            assert len(rows) == 3, cli.show(p)
            if mutation == "none":
                assert p.returncode == 0 and wrong == 0, cli.show(p)
            else:
                assert p.returncode == 3 and "WRONG RESULTS" in p.stderr, cli.show(p)
                assert all(r["wrong"] > 0 for r in rows), (mutation, dtype, rows)


if __name__ == "__main__":
    if "--bench" in sys.argv:
        BENCH = os.path.abspath(sys.argv[sys.argv.index("--bench") + 1])
    try:
        test_unmutated_passes_and_every_mutation_is_reported()
    except AssertionError as e:
        print(f"FAIL: {e}")
        sys.exit(1)
    print("PASS")
