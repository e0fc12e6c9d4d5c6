"""The launching side of bench/torch_bench.py: a variant's rank processes (environment, preload,
CPU pinning), one trial of fresh processes, and the interleaved mode's long-lived ranks taking
turns."""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time

from bench_common import free_port
from torch_bench_rank import calls_for
from torch_bench_stats import MODES, merge_first, merge_ranks


# The script every rank process runs (with --rank-of): the entry point, not this module.
ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_bench.py")


def nccl_abi_lib():
    """actorcc's libnccl.so.2 (or None, with why)."""
    env = os.environ.get("ACTORCC_NCCL_ABI_LIB")
    if env:
        return (env, None) if os.path.isfile(env) else (None, f"ACTORCC_NCCL_ABI_LIB={env} is not a file")
    try:
        out = subprocess.run([sys.executable, "-m", "actorcc.nccl", "--path"], capture_output=True, text=True,
                             timeout=60)
    except Exception as e:  # noqa: BLE001
        return None, f"python -m actorcc.nccl --path: {e}"
    path = out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else ""
    if path and os.path.isfile(path):
        return path, None
    why = (out.stderr.strip().splitlines() or ["no output"])[-1]
    return None, f"no actorcc libnccl.so.2 (python -m actorcc.nccl --path: {why}; ACTORCC_NCCL_ABI_LIB unset)"


def start_ranks(variant, world, args, ngpu, extra):
    """Starts `world` ranks of one variant (their output piped); returns (procs, None), or
    (None, why) where the variant cannot run here."""
    env = dict(os.environ)
    if args.device == "cuda" and world > ngpu:
        if variant != "actorcc":
            return None, f"skipped: {world} ranks on {ngpu} GPU(s) (NCCL refuses ranks sharing a GPU)"
        env["ACTORCC_CUDA_SHARE_GPU"] = "1"
    if variant == "nccl-actorcc":
        lib, why = nccl_abi_lib()
        if lib is None:
            return None, f"skipped: {why}"
        env["LD_PRELOAD"] = lib + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    port = free_port()
    procs = []
    for r in range(world):
        e = dict(env, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r))
        cmd = [sys.executable, ENTRY, "--rank-of", variant, "--port", str(port)] + args.forward
        cpus = cpus_of_rank(args.cpus, r, world)
        if cpus:
            cmd += ["--cpu-set", ",".join(map(str, cpus))]
        procs.append(subprocess.Popen(cmd + extra(r), env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT))
    return procs, None


def run_variant(variant, world, args, ngpu):
    """One trial: `world` fresh ranks of one variant measure everything; returns (merged rows,
    note, first-call figures)."""
    tmp = tempfile.mkdtemp(prefix="torch_bench_")
    procs, why = start_ranks(variant, world, args, ngpu, lambda r: ["--out", os.path.join(tmp, f"r{r}.json")])
    if procs is None:
        return None, why, None
    deadline = time.monotonic() + args.variant_timeout
    logs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            logs.append(out.decode(errors="replace"))
            return None, f"FAILED: timed out after {args.variant_timeout} s; rank output: {logs[-1][-600:]}", None
        logs.append(out.decode(errors="replace"))
    bad = [(r, p.returncode) for r, p in enumerate(procs) if p.returncode != 0]
    if bad:
        r = bad[0][0]
        return None, f"FAILED: rank {r} exit {bad[0][1]}: {logs[r][-1200:]}", None
    per_rank = []
    for r in range(world):
        with open(os.path.join(tmp, f"r{r}.json")) as f:
            per_rank.append(json.load(f))
    wrong = sum(pr["wrong"] for pr in per_rank)
    return (merge_ranks(variant, world, [pr["rows"] for pr in per_rank]),
            f"WRONG RESULTS on {wrong} rank x size checks" if wrong else None,
            merge_first(variant, world, args.sizes[0], [pr["first"] for pr in per_rank]))


class Served:
    """A rank process of the interleaved mode: commands on its stdin, "@@TAG ..." answers on
    its stdout among whatever else it prints (kept for the error message)."""

    def __init__(self, proc, name):
        self.proc, self.name, self.buf, self.log = proc, name, b"", []

    def send(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def expect(self, tag, deadline):
        """The rest of the next line starting with @@TAG; raises with the rank's output on
        exit or when the deadline passes."""
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                text = line.decode(errors="replace")
                if text.startswith("@@" + tag):
                    return text[len(tag) + 2:].strip()
                self.log.append(text)
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError(f"{self.name}: no answer in time; output: {' | '.join(self.log[-8:])[-600:]}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"{self.name} exited {self.proc.wait()}; output: "
                                   f"{' | '.join(self.log[-12:])[-1200:]}")
            self.buf += chunk


def run_interleaved(variants, world, args, ngpu):
    """Every variant's ranks alive at once, taking turns: round k of a mode and size runs on
    each variant in turn (the order rotating with k), the others idle meanwhile. Returns
    ({variant: [rows of round 0, rows of round 1, ...]}, {variant: graph rows}, notes,
    {variant: first-call figures})."""
    groups, notes, firsts = {}, [], {}
    for v in variants:
        procs, why = start_ranks(v, world, args, ngpu, lambda r: ["--serve"])
        if procs is None:
            notes.append(f"{v} world {world}: {why}")
        else:
            groups[v] = [Served(p, f"{v} rank {r}") for r, p in enumerate(procs)]
    samples, graphs = {v: [] for v in groups}, {}
    try:
        deadline = time.monotonic() + args.variant_timeout
        for v, ranks in list(groups.items()):
            ready = [json.loads(r.expect("ready", deadline)) for r in ranks]
            firsts[v] = merge_first(v, world, args.sizes[0], [x["first"] for x in ready])
            wrong = sum(x["wrong"] for x in ready)
            if wrong:
                notes.append(f"{v} world {world}: WRONG RESULTS on {wrong} rank x size checks")
        modes = [m for m in MODES if m != "graph"]
        for k in range(args.rounds):
            order = list(groups)[k % len(groups):] + list(groups)[:k % len(groups)]
            got = {v: {} for v in groups}
            for nbytes in args.sizes:
                for m in modes:
                    for v in order:
                        deadline = time.monotonic() + args.variant_timeout
                        for r in groups[v]:
                            r.send(f"round {m} {nbytes}")
                        vals = [r.expect("round", deadline) for r in groups[v]]
                        if "-" not in vals:
                            got[v][(nbytes, m)] = max(float(x) for x in vals)
            for v in groups:
                samples[v].append([dict({"bytes": b, "iters": calls_for(b, args)},
                                        **{m: got[v][(b, m)] for m in modes if (b, m) in got[v]})
                                   for b in args.sizes])
        for v, ranks in groups.items():
            deadline = time.monotonic() + args.variant_timeout
            for r in ranks:
                r.send("finish")
            graphs[v] = [json.loads(r.expect("rows", deadline)) for r in ranks]
    except RuntimeError as e:
        notes.append(f"FAILED: world {world}: {e}")
    finally:
        for ranks in groups.values():
            for r in ranks:
                try:
                    r.proc.stdin.close()
                    r.proc.wait(timeout=30)
                except Exception:  # noqa: BLE001 - a rank that will not stop is killed
                    r.proc.kill()
    return ({v: [merge_ranks(v, world, [rows]) for rows in rounds] for v, rounds in samples.items()},
            {v: merge_ranks(v, world, rows) for v, rows in graphs.items()}, notes, firsts)


def cpus_of_rank(spec, rank, world):
    """The CPUs rank `rank` is bound to: `none`; `auto` (2 CPUs each after the first 2 of the
    driver's, none where the machine has too few); or a list such as 2,3 (every rank on it)."""
    if spec == "none":
        return []
    if spec != "auto":
        return [int(c) for c in spec.split(",")]
    have = sorted(os.sched_getaffinity(0))
    if len(have) < 2 + 2 * world:
        return []
    return have[2 + 2 * rank: 4 + 2 * rank]
