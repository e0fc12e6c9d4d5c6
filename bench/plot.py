#!/usr/bin/env python3
"""Plot actorcc-bench JSON results (schema actorcc-bench/1).

usage: python3 bench/plot.py RESULT.json [MORE.json ...] [-o OUT.png] [--title TEXT] [-q]

Left: bus bandwidth against message size (log x). Right: time per call against message size
(log-log). One line per implementation in each file; with several files the legend also names
the launch mode, graph mode and rank count, so eager/graph or actors/torchrun runs can be laid
over each other.
"""
import argparse
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="actorcc-bench JSON files (-J output)")
    ap.add_argument("-o", "--output", help="PNG to write (default: first JSON with .png)")
    ap.add_argument("--title", help="figure title")
    ap.add_argument("-q", "--quiet", action="store_true", help="do not print the output path")
    args = ap.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    datas = [(p, load(p)) for p in args.files]
    out = args.output or os.path.splitext(args.files[0])[0] + ".png"

    fig, (ax_bw, ax_t) = plt.subplots(1, 2, figsize=(13, 5))
    many = len(datas) > 1
    plotted = 0
    for _path, data in datas:
        for res in data.get("results", []):
            rows = [r for r in res.get("rows", []) if r.get("time_us")]
            if not rows:
                continue
            x = [r["bytes"] for r in rows]
            label = label_for(data, res, many)
            style = "--" if res["impl"] != "actorcc" else "-"
            ax_bw.plot(x, [r["busbw"] for r in rows], style, marker="o", ms=3, label=label)
            ax_t.plot(x, [r["time_us"] for r in rows], style, marker="o", ms=3, label=label)
            plotted += 1
    if not plotted:
        print("plot.py: no rows to plot", file=sys.stderr)

    for ax in (ax_bw, ax_t):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(fmt_bytes))
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="both", alpha=0.3)
    ax_t.set_yscale("log")
    ax_bw.set_ylabel("bus bandwidth (GB/s)")
    ax_t.set_ylabel("time per call (us)")
    ax_bw.set_title("bus bandwidth")
    ax_t.set_title("time")
    if plotted:
        ax_t.legend(fontsize=8)

    first = datas[0][1]
    s = first.get("settings", {})
    m = first.get("machine", {})
    gpus = m.get("gpus") or []
    where = f"{len(gpus)} x {gpus[0]}" if gpus else "CPU backend"
    title = args.title or (
        f"actorcc-bench: {s.get('coll', '?')} {s.get('dtype', '?')} {s.get('op', '?')}, "
        f"{s.get('ranks', '?')} ranks, {where}" + (f", NCCL {m['nccl']}" if m.get("nccl") not in (None, "none") else "")
    )
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    if not args.quiet:
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
