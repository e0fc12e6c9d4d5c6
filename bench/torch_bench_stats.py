"""The statistics of bench/torch_bench.py: every rank's figures merged into one row per size (the
slowest rank's), the first-call figures, the trials' (or interleaved rounds') medians, and the
pairs of variants compared trial by trial."""
from __future__ import annotations

import statistics


MODES = ("sync", "async", "event", "graph", "raw", "lib")


def merge_ranks(variant, world, per_rank_rows):
    """One row per size from every rank's rows: each figure the slowest rank's, in us."""
    rows = []
    for i, row in enumerate(per_rank_rows[0]):
        merged = {"variant": variant, "world": world, "bytes": row["bytes"], "iters": row["iters"]}
        for m in MODES:
            vals = [pr[i][m] for pr in per_rank_rows if m in pr[i]]
            if vals:
                merged[m + "_us"] = max(vals) * 1e6  # the slowest rank sets the pace
        for key in ("graph_error", "lib_error"):
            err = [pr[i][key] for pr in per_rank_rows if key in pr[i]]
            if err:
                merged[key] = err[0]
        rows.append(merged)
    return rows


def merge_first(variant, world, nbytes, firsts):
    """The first-call figures of one group from every rank's (see torch_bench.py's "First
    call"), in ms."""
    out = {"variant": variant, "world": world, "bytes": nbytes}
    for key in ("init", "first", "second"):
        vals = [f[key] * 1e3 for f in firsts]
        out[key + "_ms"], out[key + "_min_ms"] = max(vals), min(vals)
    return out


def median_first(entries, label="trials"):
    """One first-call entry from several trials' (or interleaved groups': one): each figure the
    median, the values beside it."""
    out = dict(entries[0])
    for key in [k for k in entries[0] if k.endswith("_ms")]:
        vals = [e[key] for e in entries]
        out[key] = statistics.median(vals)
        if len(entries) > 1:
            out[key[:-3] + f"_{label}_ms"] = vals
    return out


PAIRS = (("nccl-actorcc", "nccl"), ("actorcc", "nccl"), ("actorcc", "gloo"))


def paired(by_variant, trial_of, world, label="trials"):
    """Trial-by-trial ratios of each pair of variants that both ran (torch_bench.py's "Pairs"); a
    trial one of the two failed in is left out."""
    out = []
    for a, b in PAIRS:
        both = sorted(set(trial_of.get(a, [])) & set(trial_of.get(b, [])))
        if len(both) < 2:
            continue
        ta = [by_variant[a][trial_of[a].index(t)] for t in both]
        tb = [by_variant[b][trial_of[b].index(t)] for t in both]
        for i, row in enumerate(ta[0]):
            entry = {"variant": a, "against": b, "world": world, "bytes": row["bytes"], label: len(both)}
            for m in ("sync", "async"):
                ratios = [ra[i][m + "_us"] / rb[i][m + "_us"] for ra, rb in zip(ta, tb)
                          if m + "_us" in ra[i] and m + "_us" in rb[i]]
                if ratios:
                    entry[m] = {"median": statistics.median(ratios), "range": [min(ratios), max(ratios)],
                                "at_or_below_1": sum(r <= 1 for r in ratios), "ratios": ratios}
            out.append(entry)
    return out


def merge_trials(trials, label="trials"):
    """One row per size from the trials' rows (or the interleaved mode's rounds: `label`):
    each figure the median over them, and with several their (min, max) and values beside it."""
    out = []
    for i, row in enumerate(trials[0]):
        merged = dict(row)
        for m in MODES:
            vals = [t[i][m + "_us"] for t in trials if i < len(t) and m + "_us" in t[i]]
            if not vals:
                continue
            merged[m + "_us"] = statistics.median(vals)
            if len(trials) > 1:
                merged[m + "_range_us"] = [min(vals), max(vals)]
                merged[m + f"_{label}_us"] = vals
        if len(trials) > 1:
            merged[label] = len(trials)
        out.append(merged)
    return out
