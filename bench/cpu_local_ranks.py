#!/usr/bin/env python3
"""How the CPU backend's set-up grows with the number of local ranks: N rank processes on this
host (actorcc-bench --launch torchrun: all start at once) join one group, and per N this records
the time from the last rank's arrival to the last rank's Communicator being ready (the bench's
"init"), the shared-memory segment's size (from a rank's /proc/<pid>/maps) and each rank's peak
RSS (VmHWM), then fits the growth exponent of the set-up time (least squares on log-log):

    python bench/cpu_local_ranks.py --bench after=build/dev/tools/bench/actorcc-bench \
        --bench before=/path/to/old/actorcc-bench --ranks 16,32,64,128,256 \
        --max-ranks before=128 --out bench/results/<date>-cpu-localranks/localranks.json

Each --bench is LABEL=PATH (several compare trees in one run: same machine, same load).
--max-ranks LABEL=N skips larger N for that build (an old tree whose segment grows as N^2 would
need GBs of /dev/shm per run). Each point is the median of --trials runs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time


def children(pid):
    """Direct children of `pid` (the launcher's worker processes)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        if int(st[st.rfind(")") + 2:].split()[1]) == pid:
            out.append(int(d))
    return out


def probe(pid):
    """(VmHWM in bytes, size of the mapped actorcc shared-memory segment in bytes) of `pid`,
    or None where the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            hwm = next((int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:")), 0)
        seg = 0
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                if "/dev/shm/actorcc-" in line:
                    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                    seg += hi - lo
        return hwm, seg
    except OSError:
        return None


def run_once(bench, n, timeout, coll="all_reduce", maxbytes="8"):
    """One group of n ranks: (init ms, segment bytes, [peak RSS bytes per rank]). The bench
    checks every result exactly (and fails on a wrong one); its calls keep the ranks up for
    the probe a while after the group formed."""
    with tempfile.TemporaryDirectory(prefix="localranks-") as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [bench, "--backend", "cpu", "--ranks", str(n), "--launch", "torchrun", "--coll", coll, "-b", "8",
               "-e", maxbytes, "-n", "40", "-w", "2", "--no-plot", "--timeout", str(timeout), "-J", out]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        rss, seg = {}, 0
        while p.poll() is None:
            for c in children(p.pid):
                got = probe(c)
                if got:
                    rss[c] = max(rss.get(c, 0), got[0])
                    seg = max(seg, got[1])
            time.sleep(0.1)
        err = p.stderr.read()
        if p.returncode != 0:
            raise SystemExit(f"cpu_local_ranks: {bench} with {n} ranks failed ({p.returncode}): {err[-2000:]}")
        with open(out) as f:
            d = json.load(f)
        init = d["results"][0]["startup"]["init_ms"] if "results" in d else find_init(d)
        return init, seg, sorted(rss.values())


def find_init(d):
    """The first "init_ms" anywhere in the bench's JSON."""
    if isinstance(d, dict):
        if "init_ms" in d:
            return d["init_ms"]
        vals = d.values()
    elif isinstance(d, list):
        vals = d
    else:
        return None
    for v in vals:
        r = find_init(v)
        if r is not None:
            return r
    return None


def exponent(points):
    """Least-squares slope of log(ms) over log(n): the growth exponent."""
    pts = [(math.log(n), math.log(ms)) for n, ms in points if ms and ms > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", action="append", required=True, help="LABEL=PATH of an actorcc-bench")
    ap.add_argument("--ranks", default="16,32,64,128,256")
    ap.add_argument("--max-ranks", action="append", default=[], help="LABEL=N: largest N for that build")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--coll", default="all_reduce", help="the bench's collective (all_to_all: every pair)")
    ap.add_argument("--maxbytes", default="8", help="the bench's largest message")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    benches = [b.split("=", 1) for b in a.bench]
    caps = {k: int(v) for k, v in (m.split("=", 1) for m in a.max_ranks)}
    sizes = [int(x) for x in a.ranks.split(",")]
    res = {"command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                       "mem_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
           "builds": {}}
    for label, path in benches:
        rows = []
        for n in sizes:
            if n > caps.get(label, n):
                continue
            trials = [run_once(path, n, a.timeout, a.coll, a.maxbytes) for _ in range(a.trials)]
            row = {"ranks": n,
                   "init_ms": [t[0] for t in trials],
                   "init_ms_median": statistics.median(t[0] for t in trials),
                   "segment_bytes": max(t[1] for t in trials),
                   "segment_bytes_per_rank": max(t[1] for t in trials) // n,
                   "rss_bytes_median": statistics.median(v for t in trials for v in t[2]),
                   "rss_bytes_max": max(v for t in trials for v in t[2])}
            rows.append(row)
            print(json.dumps({"build": label, **row}), flush=True)
        res["builds"][label] = {"bench": path, "points": rows,
                                "init_exponent": exponent([(r["ranks"], r["init_ms_median"]) for r in rows]),
                                "segment_exponent": exponent([(r["ranks"], r["segment_bytes"]) for r in rows])}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    for label, b in res["builds"].items():
        print(f"{label}: set-up time ~ N^{b['init_exponent']}, segment ~ N^{b['segment_exponent']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
