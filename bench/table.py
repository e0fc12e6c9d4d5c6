#!/usr/bin/env python3
"""The all-reduce table of a GPU run folder (bench/results/<run>/bench/*.json, as written by
scripts/device.sh bench) in Markdown, with the latency bars (2 ranks; for other worlds the column
says where NCCL was faster instead) checked per size: actorcc eager and
graph against NCCL and NCCL with symmetric windows from the same run, the ratio to the faster
of the two, the algorithm actorcc's planner ran, and the ratio ranges of the permuted-device and
torchrun cases. With --coll (reduce_scatter, all_gather, broadcast): that collective's table
from the actors-eager-<coll> / actors-graph-<coll> cases (device.sh bench), no bars; the
last column says where the faster NCCL beat actorcc.

    python3 bench/table.py bench/results/2026-11-30-h200x2-h
    python3 bench/table.py bench/results/2026-11-30-h200x2-u --coll reduce_scatter

Any other run folder (scripts/bench.sh writes bench/results/local/<date>-<host>.json) or a
single -J JSON file: the table of that one run (the newest in the folder), every
implementation it measured side by side, no bars.

    python3 bench/table.py bench/results/local
"""
import glob
import json
import os
import sys

# The latency bars actorcc must meet against NCCL: (largest size, eager us, graph us); from 64 MiB busbw >= 340 GB/s.
BARS = [(64 << 10, 5.0, 3.0), (256 << 10, 6.0, 6.0), (1 << 20, 9.0, 9.0), (4 << 20, 17.0, 17.0),
        (16 << 20, 52.0, 52.0)]
BUSBW_BAR = 340.0


def load(folder, case):
    found = glob.glob(os.path.join(folder, "bench", f"*-{case}.json"))
    if not found:
        return None
    with open(found[0]) as f:
        doc = json.load(f)
    impls = {r["impl"]: r for r in doc["results"] if not r.get("skipped")}
    impls["_ranks"] = doc.get("settings", {}).get("ranks", 2)
    return impls


def rows(result):
    return {r["bytes"]: r for r in result["rows"]} if result else {}


def size_name(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return str(b)


def verdict(b, t, busbw, graph):
    """'' when the bar holds, else how far it is missed."""
    for top, eager_bar, graph_bar in BARS:
        if b <= top:
            bar = graph_bar if graph else eager_bar
            return "" if t <= bar else f"{'graph' if graph else 'eager'} missed by {t - bar:.2f} us"
    return "" if busbw >= BUSBW_BAR else f"{'graph' if graph else 'eager'} missed by {BUSBW_BAR - busbw:.1f} GB/s"


def against_nccl(ea, ga):
    """Beyond 2 ranks there are no bars: '' when actorcc is at least as fast as the faster NCCL
    in both modes, else by how much NCCL was faster."""
    slow = [f"{mode} NCCL {100 * (r['ratio'] - 1):.0f}% faster" for mode, r in (("eager", ea), ("graph", ga))
            if r and r.get("ratio", 0) > 1.0]
    return ", ".join(slow)


def cell(r, big):
    if r is None:
        return "-"
    return f"{r['time_us']:.1f} ({r['busbw']:.1f} GB/s)" if big else f"{r['time_us']:.2f}"


def ratio_range(result):
    ratios = [r["ratio"] for r in rows(result).values() if "ratio" in r]
    return f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"


def bench_jsons(folder):
    """actorcc-bench JSON files directly in `folder` or in its bench/, oldest first (their
    names start with the date and time)."""
    found = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json")) + glob.glob(os.path.join(folder, "bench", "*.json"))):
        try:
            with open(path) as f:
                if json.load(f).get("schema") == "actorcc-bench/1":
                    found.append(path)
        except (OSError, ValueError, AttributeError):
            continue
    return found


def one_run(path, note=""):
    """The table of one actorcc-bench JSON: each implementation's time and busbw per size,
    the ratio to the fastest other implementation, and the rows' #wrong."""
    with open(path) as f:
        doc = json.load(f)
    if doc.get("schema") != "actorcc-bench/1":
        sys.exit(f"{path}: not an actorcc-bench/1 JSON (schema={doc.get('schema')!r})")
    s, m = doc.get("settings", {}), doc.get("machine", {})
    impls = [r for r in doc.get("results", []) if not r.get("skipped")]
    if not impls:
        sys.exit(f"{path}: no results")
    where = f"{len(m['gpus'])} x {m['gpus'][0]}" if m.get("gpus") else "CPU backend"
    print(f"{os.path.basename(path)}{note}: {s.get('coll', '?')} {s.get('dtype', '?')} {s.get('op', '?')}, "
          f"{s.get('ranks', '?')} ranks, {where}, {'CUDA graph' if s.get('graph') else 'eager'}\n")
    names = [r["impl"] for r in impls]
    per = [rows(r) for r in impls]
    sizes = sorted({b for p in per for b in p})
    head = " | ".join(f"{n} us (busbw GB/s)" for n in names)
    ratio = len(names) > 1 and names[0] == "actorcc"
    print(f"| bytes | {head} |{' actorcc / fastest other |' if ratio else ''} algorithm | #wrong |")
    print("| ---: |" + " ---: |" * len(names) + (" ---: |" if ratio else "") + " --- | ---: |")
    for b in sizes:
        cells = " | ".join(f"{p[b]['time_us']:.2f} ({p[b]['busbw']:.2f})" if b in p else "-" for p in per)
        extra = ""
        if ratio:
            others = [p[b]["time_us"] for p in per[1:] if b in p and p[b]["time_us"] > 0]
            extra = f" {per[0][b]['time_us'] / min(others):.2f} |" if b in per[0] and others else " - |"
        algo = next((p[b].get("algo") for p in per if b in p and p[b].get("algo")), "-")
        wrong = sum(p[b]["wrong"] for p in per if b in p)
        print(f"| {size_name(b)} | {cells} |{extra} {algo} | {wrong} |")
    for r in impls:
        st = r.get("startup")
        if st:
            print(f"Start-up, {r['impl']}: init {st['init_ms']:.1f} ms, first 4 KB call {st['first_op_ms']:.2f} ms.")


def main(folder, coll=None):
    suffix = f"-{coll}" if coll else ""
    if os.path.isfile(folder):
        return one_run(folder)
    eager, graph = load(folder, "actors-eager" + suffix), load(folder, "actors-graph" + suffix)
    if not eager or not graph:
        runs = [] if coll else bench_jsons(folder)
        if runs:  # any other folder the bench writes, e.g. scripts/bench.sh's bench/results/local
            note = f" (newest of {len(runs)} runs in {folder}; pass a JSON file for another)" if len(runs) > 1 else ""
            return one_run(runs[-1], note)
        sys.exit(f"{folder}: no actorcc-bench JSON here or under bench/"
                 + (f" (and no actors-eager{suffix} / actors-graph{suffix} case)" if coll else ""))
    ranks = eager.pop("_ranks")
    bars = ranks == 2 and not coll
    graph.pop("_ranks")
    e_a, g_a = rows(eager["actorcc"]), rows(graph["actorcc"])
    e_n, e_s = rows(eager.get("nccl")), rows(eager.get("nccl-symmetric"))
    g_n, g_s = rows(graph.get("nccl")), rows(graph.get("nccl-symmetric"))
    print("| bytes | actorcc eager | NCCL eager | NCCL symm. eager | ratio | actorcc graph | NCCL graph "
          f"| NCCL symm. graph | ratio | algorithm | {'bar' if bars else f'{ranks} ranks: against NCCL'} |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for b in sorted(e_a):
        big = b >= 64 << 20
        ea, ga = e_a[b], g_a.get(b)
        if bars:
            missed = [v for v in (verdict(b, ea["time_us"], ea["busbw"], False),
                                  verdict(b, ga["time_us"], ga["busbw"], True) if ga else "") if v]
        else:
            missed = [v for v in (against_nccl(ea, ga),) if v]
        print(f"| {size_name(b)} | {cell(ea, big)} | {cell(e_n.get(b), False)} | {cell(e_s.get(b), False)} "
              f"| {ea.get('ratio', float('nan')):.2f} | {cell(ga, big)} | {cell(g_n.get(b), False)} "
              f"| {cell(g_s.get(b), False)} | {ga.get('ratio', float('nan')) if ga else float('nan'):.2f} "
              f"| {ea.get('algo', '-')} | {', '.join(missed) if missed else ('met' if bars else 'not slower')} |")
    wrong = sum(r["wrong"] for res in (eager, graph) for impl in res.values() for r in impl["rows"])
    print(f"\n#wrong summed over every row of the eager and graph cases: {wrong}.")
    print(f"Ratios (actorcc / fastest NCCL): eager {ratio_range(eager['actorcc'])}, "
          f"graph {ratio_range(graph['actorcc'])}", end="")
    permute = None if coll else load(folder, "actors-permute")
    if permute:
        permute.pop("_ranks")
        print(f", permuted devices {ratio_range(permute['actorcc'])}", end="")
    torchrun, torchrun_nccl = (None, None) if coll else (load(folder, "torchrun"), load(folder, "torchrun-nccl"))
    for res in (torchrun, torchrun_nccl):
        if res:
            res.pop("_ranks")
    if torchrun and torchrun_nccl and "actorcc" in torchrun:
        ta, tn = rows(torchrun["actorcc"]), rows(torchrun_nccl.get("nccl"))
        rs = [ta[b]["time_us"] / tn[b]["time_us"] for b in ta if b in tn and tn[b]["time_us"] > 0]
        if rs:
            print(f", torchrun launch (against NCCL under torchrun) {min(rs):.2f}-{max(rs):.2f}", end="")
    print(".")
    for impl, r in eager.items():
        s = r["startup"]
        print(f"Start-up, {impl}: init {s['init_ms']:.1f} ms, first 4 KB call {s['first_op_ms']:.2f} ms.")


if __name__ == "__main__":
    if len(sys.argv) == 2:
        main(sys.argv[1])
    elif len(sys.argv) == 4 and sys.argv[2] == "--coll":
        main(sys.argv[1], sys.argv[3])
    else:
        sys.exit(__doc__)
