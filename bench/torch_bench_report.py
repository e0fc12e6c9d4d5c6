"""What bench/torch_bench.py prints and draws: the table per world, the pairs' ratios, the
first-call figures, and the PNG plot."""
from __future__ import annotations

from bench_common import fmt_bytes
from torch_bench_stats import MODES


def print_first(entries, world, out):
    if not entries:
        return
    print(f"# world {world}: first dist.all_reduce after init_process_group ({fmt_bytes(entries[0]['bytes'])}), "
          f"ms, slowest rank [fastest]", file=out)
    for e in entries:
        print(f"  {e['variant']:>13}  init {e['init_ms']:9.2f} [{e['init_min_ms']:.2f}]  first call "
              f"{e['first_ms']:9.2f} [{e['first_min_ms']:.2f}]  second call {e['second_ms']:8.2f} "
              f"[{e['second_min_ms']:.2f}]", file=out)


def print_pairs(pairs, out, label="trials"):
    if not pairs:
        return
    print(f"# ratios {label[:-1]} by {label[:-1]} (variant / against): median [range], {label} at or below 1",
          file=out)
    for p in pairs:
        cells = []
        for m in ("sync", "async"):
            if m in p:
                c = p[m]
                cells.append(f"{m} {c['median']:.3f} [{c['range'][0]:.2f}-{c['range'][1]:.2f}] "
                             f"{c['at_or_below_1']}/{len(c['ratios'])}")
        print(f"  {p['variant']:>12} / {p['against']:<5} {fmt_bytes(p['bytes']):>9}  " + "   ".join(cells), file=out)


def print_table(rows, world, out):
    cols = [m for m in MODES if any(m + "_us" in r for r in rows)]
    head = f"{'variant':>13} {'size':>9} " + " ".join(f"{m + ' us':>10}" for m in cols)
    print(f"# world {world}: time per dist.all_reduce call (float32 sum), slowest rank", file=out)
    print("#" + head, file=out)
    for r in rows:
        vals = " ".join(f"{r[m + '_us']:>10.2f}" if m + "_us" in r else f"{'-':>10}" for m in cols)
        print(f" {r['variant']:>13} {fmt_bytes(r['bytes']):>9} {vals}", file=out)


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    worlds = sorted({r["world"] for r in result["rows"]})
    fig, axes = plt.subplots(1, len(worlds), figsize=(6 * len(worlds), 4.5), squeeze=False)
    for ax, w in zip(axes[0], worlds):
        rows = [r for r in result["rows"] if r["world"] == w]
        for v in sorted({r["variant"] for r in rows}):
            for m in ("sync", "async", "graph", "raw", "lib"):
                pts = [(r["bytes"], r[m + "_us"]) for r in rows if r["variant"] == v and m + "_us" in r]
                if pts:
                    ax.plot(*zip(*pts), marker="o", linestyle="-" if m == "sync" else "--", label=f"{v} {m}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message (bytes)")
        ax.set_ylabel("time per call (us)")
        ax.set_title(f"{result['meta']['device']} - world {w}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"dist.all_reduce per call, torch {result['meta']['torch']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
