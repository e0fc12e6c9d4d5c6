#!/usr/bin/env python3
"""torch.distributed per-call cost of backend "actorcc" against "nccl" (GPU) and "gloo" (CPU),
in the same run, on the same machine.

    python3 bench/torch_bench.py --device cuda --worlds 1,2 -o bench/results/RUN
    python3 bench/torch_bench.py --device cpu --worlds 1,2,4 -o bench/results/RUN

Variants (--variants, default: every one that applies to the device):
  actorcc        init_process_group("actorcc"), CPU or CUDA tensors
  gloo           (CPU) torch's gloo backend
  nccl           (CUDA) torch's NCCL backend
  nccl-actorcc   (CUDA) the NCCL backend with actorcc's libnccl.so.2 preloaded (path from
                 `python -m actorcc.nccl --path` or ACTORCC_NCCL_ABI_LIB; skipped with a note
                 where neither names a file)
Each variant and world runs in its own group of processes (a preload must be there from the
start). Ranks that outnumber the GPUs share them (ACTORCC_CUDA_SHARE_GPU=1): actorcc only,
as NCCL refuses two ranks on one GPU, so the NCCL variants run only where each rank has a GPU.

What is timed (dist.all_reduce of float32, SUM, sizes -b..-e by -f; -n calls per round, the
median of -r rounds, every rank's figure gathered and the largest kept; with --trials K every
variant runs K times in rotating order and each figure is the median of the K, its range beside
it):
  sync      per-call host time: n back-to-back dist.all_reduce(x), one sync at the end
            (CUDA: torch.cuda.synchronize(); CPU: the calls are synchronous), divided by n
  async     the same with async_op=True, every Work waited on at the end
  event     (CUDA) the time between CUDA events around the n sync calls, divided by n
  graph     (CUDA) n calls captured in one torch.cuda.graph, replayed: time per call (after
            every eager figure of the process, so a capture's leftovers cannot weigh on those)
  raw       (actorcc) the group's own actorcc.Communicator.all_reduce on the same tensor
            (CPU: the same call without torch.distributed)
  lib       (nccl, nccl-actorcc) ncclAllReduce of the process's libnccl.so.2 called through ctypes
            on torch's own communicator and the same tensor: the library's share of a call,
            apart from torch's (ctypes adds about 1 us alike to both libraries)
The results are checked (every rank's input is rank + 1, the sum world * (world + 1) / 2).

First call (every variant, every trial): init_process_group's time, then the time of the first
dist.all_reduce after it (the smallest size -b; a backend forming its communicator lazily pays
for that here) and of the second, each a sync call alone; per variant the slowest and the
fastest rank's (the ranks leave init_process_group at different times, and a first call also
waits for the last rank to arrive), the medians over the trials. On CUDA every variant's
init_process_group is given its device (device_id), so NCCL's backend and actorcc's form their
communicators there.

Pairs: with several trials, every pair of variants that both ran (actorcc and nccl-actorcc
against nccl, actorcc against gloo) is also compared trial by trial: in the rotation the two run
minutes apart at most, so the ratio of their figures in one trial cancels the machine's slower
drift (other tenants, clocks) that the trials' medians keep. Each pair gets the median ratio,
its range, and how many trials had it at or below 1 (sync and async_op).

Interleaved (--interleave): instead of fresh processes per trial, every variant's ranks start
once and take turns: round k of each mode at each size runs on one variant, then on the next
(the order rotating with k), the others idle meanwhile. Each figure is then the median of the -r
rounds, the pairs are compared round by round (rounds of two variants run within a second of
each other), and the graphs are timed once at the end. This is what resolves differences of a
few percent on a machine whose speed drifts between minutes (a shared host); the trials mode
shows the spread between processes.

Pinning (--cpus, default auto): each rank's process is bound to CPUs of its own, the same for
every variant, before torch is imported, so its threads do not migrate between cores from one
trial to the next; auto gives rank r the 2 CPUs after the first 2 of the machine's where there
are enough (none otherwise, as on a 2-core machine). Interleaved, rank r of every variant has the
same CPUs (they take turns).

Output: a table like nccl-tests' per world, JSON (schema actorcc-torch-bench/1) and a PNG plot
in the folder of -o.

This file is the entry point (the CLI, and the script every rank process runs); the rank is
torch_bench_rank.py, the launching torch_bench_launch.py, the merging and pairs
torch_bench_stats.py, the table and plot torch_bench_report.py.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # its modules, however it is loaded

# Every name this file held before it was split stays importable from it.
from bench_common import fmt_bytes, free_port, parse_size  # noqa: E402,F401
from torch_bench_launch import (Served, cpus_of_rank, nccl_abi_lib, run_interleaved, run_variant,  # noqa: E402,F401
                                start_ranks)
from torch_bench_rank import RankBench, calls_for, graph_time, nccl_lib_call, rank_main, rank_serve  # noqa: E402,F401
from torch_bench_report import plot, print_first, print_pairs, print_table  # noqa: E402
from torch_bench_stats import (MODES, PAIRS, median_first, merge_first, merge_ranks, merge_trials,  # noqa: E402,F401
                               paired)

SCHEMA = "actorcc-torch-bench/1"


def sizes_of(args):
    out, b = [], parse_size(args.min_bytes)
    while b <= parse_size(args.max_bytes):
        out.append(b)
        b *= args.factor
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when torch sees a GPU")
    p.add_argument("--worlds", default="1,2", help="comma list of process counts")
    p.add_argument("--variants", default="", help="comma list (default: all for the device)")
    p.add_argument("-b", "--min-bytes", default="4K")
    p.add_argument("-e", "--max-bytes", default="16M")
    p.add_argument("-f", "--factor", type=int, default=16)
    p.add_argument("-n", "--iters", type=int, default=2000, help="calls per round (fewer for large sizes)")
    p.add_argument("--min-iters", type=int, default=5)
    p.add_argument("--bytes-per-round", type=float, default=256e6, help="caps calls per round at large sizes")
    p.add_argument("-r", "--rounds", type=int, default=5)
    p.add_argument("--graph-calls", type=int, default=100, help="calls captured in one graph")
    p.add_argument("--timeout", type=float, default=120, help="the groups' timeout (s)")
    p.add_argument("--variant-timeout", type=float, default=300, help="cap per variant and world (s)")
    p.add_argument("--trials", type=int, default=1,
                   help="runs of every variant per world, in rotating order; figures are the median")
    p.add_argument("--interleave", action="store_true",
                   help="every variant's ranks at once, taking turns round by round (see Interleaved)")
    p.add_argument("--cpus", default="auto", help="auto, none, or a CPU list every rank is bound to (see Pinning)")
    p.add_argument("-o", "--out", default="", help="result folder (JSON + PNG)")
    p.add_argument("--name", default="torch_bench", help="file name stem in the folder")
    p.add_argument("--rank-of", default=None, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--cpu-set", default="", help=argparse.SUPPRESS)
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args, _ = p.parse_known_args()
    if args.device is None:
        import torch
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.sizes = sizes_of(args)
    if args.rank_of:
        args.variant = args.rank_of
        if args.serve:
            rank_serve(args)
            return 0
        res = rank_main(args)
        with open(args.out, "w") as f:
            json.dump(res, f)
        return 0

    args.forward = ["--device", args.device, "-b", args.min_bytes, "-e", args.max_bytes, "-f", str(args.factor),
                    "-n", str(args.iters), "--min-iters", str(args.min_iters), "--bytes-per-round",
                    str(args.bytes_per_round), "-r", str(args.rounds), "--graph-calls", str(args.graph_calls),
                    "--timeout", str(args.timeout)]
    import torch
    ngpu = torch.cuda.device_count() if args.device == "cuda" else 0
    variants = [v for v in args.variants.split(",") if v] or (
        ["actorcc", "nccl", "nccl-actorcc"] if args.device == "cuda" else ["actorcc", "gloo"])
    worlds = [int(w) for w in args.worlds.split(",")]
    device = torch.cuda.get_device_name(0) if ngpu else (platform.processor() or platform.machine())
    meta = {"schema": SCHEMA, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(),
            "device": device if args.device == "cuda" else f"CPU ({os.cpu_count()} cores)",
            "gpus": ngpu, "torch": torch.__version__, "python": platform.python_version(),
            "dtype": "float32", "op": "sum", "rounds": args.rounds, "iters": args.iters, "trials": args.trials, "interleaved": args.interleave,
            "cpus": {str(w): [cpus_of_rank(args.cpus, r, w) for r in range(w)] for w in worlds},
            "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:])}
    try:
        import actorcc
        meta["actorcc"] = getattr(actorcc._actorcc, "__version__", "?")
    except ImportError:
        pass
    result = {"meta": meta, "rows": [], "notes": []}
    failed = False
    print(f"# torch {meta['torch']}, {meta['device']}, {ngpu} GPU(s); variants {','.join(variants)}; "
          f"worlds {','.join(map(str, worlds))}")
    label = "rounds" if args.interleave else "trials"
    for w in worlds:
        if args.interleave:
            t0 = time.monotonic()
            by_variant, graph_rows, notes, firsts = run_interleaved(variants, w, args, ngpu)
            firsts = {v: [f] for v, f in firsts.items()}
            for note in notes:
                result["notes"].append(note)
                print(f"# {note}")
                failed |= "FAILED" in note or "WRONG" in note
            print(f"# world {w}, {len(by_variant)} variant(s) interleaved, {args.rounds} rounds: "
                  f"{time.monotonic() - t0:.0f} s")
            trial_of = {v: list(range(len(rounds))) for v, rounds in by_variant.items()}
        else:
            by_variant, trial_of, graph_rows, firsts = {}, {}, {}, {}
            for t in range(args.trials):
                # Trial t starts the rotation at variant t: drift of the machine (clocks, other
                # tenants) falls on every variant alike instead of on whichever runs last.
                for v in variants[t % len(variants):] + variants[:t % len(variants)]:
                    t0 = time.monotonic()
                    rows, note, first = run_variant(v, w, args, ngpu)
                    if note:
                        result["notes"].append(f"{v} world {w} trial {t}: {note}")
                        print(f"# {v} world {w} trial {t}: {note}")
                        failed |= note.startswith(("FAILED", "WRONG"))
                    if rows:
                        by_variant.setdefault(v, []).append(rows)
                        trial_of.setdefault(v, []).append(t)
                        firsts.setdefault(v, []).append(first)
                        print(f"# {v} world {w} trial {t}: {time.monotonic() - t0:.0f} s")
        rows_w = []
        for v in variants:
            if by_variant.get(v):
                merged = merge_trials(by_variant[v], label)
                for row, g in zip(merged, graph_rows.get(v, [])):  # interleaved: graphs once, at the end
                    row.update({k: g[k] for k in ("graph_us", "graph_error") if k in g})
                rows_w += merged
        result["rows"] += rows_w
        first_w = [median_first(firsts[v], label) for v in variants if firsts.get(v)]
        result.setdefault("first_calls", []).extend(first_w)
        pairs_w = paired(by_variant, trial_of, w, label)
        result.setdefault("pairs", []).extend(pairs_w)
        if rows_w:
            print_table(rows_w, w, sys.stdout)
            print_pairs(pairs_w, sys.stdout, label)
            print_first(first_w, w, sys.stdout)
        sys.stdout.flush()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        stem = os.path.join(args.out, args.name)
        with open(stem + ".json", "w") as f:
            json.dump(result, f, indent=1)
        try:
            plot(result, stem + ".png")
        except Exception as e:  # noqa: BLE001 - the JSON is the result; the plot is a view of it
            print(f"# plot failed: {e}")
        print(f"# wrote {stem}.json and .png")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
