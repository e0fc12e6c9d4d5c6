#!/usr/bin/env python3
"""Plot actorcc-bench JSON results (schema actorcc-bench/1).

usage: python3 bench/plot.py RESULT.json|RUN_FOLDER [MORE ...] [-o OUT.png] [--title TEXT] [-q]

Left: bus bandwidth against message size (log x). Right: time per call against message size
(log-log), legend on both. A run folder stands for its newest JSON. One line per
implementation in each file; with several files the legend also names
the launch mode, graph mode and rank count, so eager/graph or actors/torchrun runs can be laid
over each other.
"""
import argparse
import glob
import json
import os
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    if data.get("schema") != "actorcc-bench/1":
        raise SystemExit(f"{path}: not an actorcc-bench/1 file (schema={data.get('schema')!r})")
    return data


def fmt_bytes(b, _pos=None):
    for unit in ("", "K", "M", "G", "T"):
        if abs(b) < 1024 or unit == "T":
            return f"{b:g}{unit}"
        b /= 1024.0
    return f"{b:g}"


def label_for(data, result, many_files):
    s = data.get("settings", {})
    label = result["impl"]
    if many_files:
        mode = "graph" if s.get("graph") else "eager"
        extra = [s.get("launch", "?"), mode, f"{s.get('ranks', '?')} ranks"]
        if s.get("permute"):
            extra.append("permuted")
        if s.get("nodes", 1) and s.get("nodes", 1) > 1:
            extra.append(f"{s['nodes']} nodes")
        label += " (" + ", ".join(extra) + ")"
    return label


def fmt_us(t, _pos=None):
    """Log-axis label of a time in microseconds: '5 us', '20 us', '1 ms', '2.5 s'."""
    for unit, scale in (("s", 1e6), ("ms", 1e3)):
        if t >= scale:
            return f"{t / scale:g} {unit}"
    return f"{t:g} us"


def size_ticks(lo, hi, most=8):
    """Powers of two from lo to hi (bytes), every 2**k-th so that at most `most` remain."""
    a, b = max(0, int(lo).bit_length() - 1), max(0, int(hi - 1).bit_length())
    step = 1
    while (b - a) // step + 1 > most:
        step *= 2
    return [1 << e for e in range(a, b + 1, step)]


def draw(datas, title=None):
    """The figure of [(path, data), ...]: bus bandwidth and time against message size, one
    line per implementation and file, the legend on both panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    fig, (ax_bw, ax_t) = plt.subplots(1, 2, figsize=(13, 5))
    many = len(datas) > 1
    sizes = []
    for _path, data in datas:
        for res in data.get("results", []):
            rows = [r for r in res.get("rows", []) if r.get("time_us")]
            if not rows:
                continue
            x = [r["bytes"] for r in rows]
            sizes += x
            label = label_for(data, res, many)
            style = "--" if res["impl"] != "actorcc" else "-"
            ax_bw.plot(x, [r["busbw"] for r in rows], style, marker="o", ms=3, label=label)
            ax_t.plot(x, [r["time_us"] for r in rows], style, marker="o", ms=3, label=label)
    if not sizes:
        print("plot.py: no rows to plot", file=sys.stderr)

    for ax in (ax_bw, ax_t):
        ax.set_xscale("log", base=2)
        if sizes:
            ax.xaxis.set_major_locator(FixedLocator(size_ticks(min(sizes), max(sizes))))
        ax.xaxis.set_major_formatter(FuncFormatter(fmt_bytes))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="both", alpha=0.3)
        if sizes:
            ax.legend(fontsize=8, loc="upper left")
    ax_t.set_yscale("log")
    # 1-2-5 steps with their unit ('20 us', '1 ms') instead of the default 10^n labels
    ax_t.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax_t.yaxis.set_major_formatter(FuncFormatter(fmt_us))
    ax_t.yaxis.set_minor_formatter(NullFormatter())
    ax_bw.set_ylabel("bus bandwidth (GB/s)")
    ax_t.set_ylabel("time per call")
    ax_bw.set_title("bus bandwidth")
    ax_t.set_title("time")

    first = datas[0][1]
    s = first.get("settings", {})
    m = first.get("machine", {})
    gpus = m.get("gpus") or []
    where = f"{len(gpus)} x {gpus[0]}" if gpus else "CPU backend"
    fig.suptitle(title or (
        f"actorcc-bench: {s.get('coll', '?')} {s.get('dtype', '?')} {s.get('op', '?')}, "
        f"{s.get('ranks', '?')} ranks, {where}" + (f", NCCL {m['nccl']}" if m.get("nccl") not in (None, "none") else "")
    ))
    fig.tight_layout()
    return fig


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="actorcc-bench JSON files (-J output), or run folders holding them")
    ap.add_argument("-o", "--output", help="PNG to write (default: first JSON with .png)")
    ap.add_argument("--title", help="figure title")
    ap.add_argument("-q", "--quiet", action="store_true", help="do not print the output path")
    args = ap.parse_args(argv)

    paths = []
    for p in args.files:
        if os.path.isdir(p):  # a run folder: the newest JSON in it (scripts/bench.sh's bench/results/local)
            found = sorted(glob.glob(os.path.join(p, "*.json")) + glob.glob(os.path.join(p, "bench", "*.json")))
            found = [f for f in found if _schema(f) == "actorcc-bench/1"]
            if not found:
                raise SystemExit(f"{p}: no actorcc-bench JSON in this folder or its bench/")
            paths.append(found[-1])
        else:
            paths.append(p)
    datas = [(p, load(p)) for p in paths]
    out = args.output or os.path.splitext(paths[0])[0] + ".png"
    fig = draw(datas, args.title)
    fig.savefig(out, dpi=120)
    if not args.quiet:
        print(f"wrote {out}")
    return 0


def _schema(path):
    try:
        with open(path) as f:
            return json.load(f).get("schema")
    except (OSError, ValueError, AttributeError):
        return None


if __name__ == "__main__":
    sys.exit(main())
