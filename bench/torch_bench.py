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
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SCHEMA = "actorcc-torch-bench/1"
MODES = ("sync", "async", "event", "graph", "raw", "lib")


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    return int(float(s[:-1] if s[-1:] in "KMG" else s) * mult)


def fmt_bytes(b):
    for unit in ("B", "KB", "MB", "GB"):
        if b < 1024 or unit == "GB":
            return f"{b:g} {unit}"
        b /= 1024
    return str(b)


def sizes_of(args):
    out, b = [], parse_size(args.min_bytes)
    while b <= parse_size(args.max_bytes):
        out.append(b)
        b *= args.factor
    return out


def free_port():
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


# ---- one rank ---------------------------------------------------------------------------------
def calls_for(nbytes, args):
    """Calls per round at this size: -n, fewer for large messages (bounded bytes per round)."""
    return max(args.min_iters, min(args.iters, int(args.bytes_per_round // max(nbytes, 1))))


class RankBench:
    """One rank of one variant: its group, a tensor per size (each checked once on a known
    input), and one timed round of a mode at a size on demand."""

    def __init__(self, args):
        if args.cpu_set:
            os.sched_setaffinity(0, {int(c) for c in args.cpu_set.split(",")})
        import torch
        import torch.distributed as dist
        self.torch, self.dist, self.args = torch, dist, args
        self.rank, self.world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.cuda = args.device == "cuda"
        self.backend = {"actorcc": "actorcc", "gloo": "gloo", "nccl": "nccl", "nccl-actorcc": "nccl"}[args.variant]
        if self.backend == "actorcc":
            import actorcc.torch  # noqa: F401  registers the backend
        if self.cuda:
            torch.cuda.set_device(self.rank % torch.cuda.device_count())
        self.dev = torch.device("cuda", torch.cuda.current_device()) if self.cuda else torch.device("cpu")
        t0 = time.perf_counter()
        # CUDA: the group's device given, as torch asks of NCCL's users (device_id: NCCL's backend
        # and actorcc's form their communicators in init_process_group, not in the first call)
        bound = {"device_id": self.dev} if self.cuda else {}
        dist.init_process_group(self.backend, init_method=f"tcp://127.0.0.1:{args.port}", rank=self.rank,
                                world_size=self.world, timeout=datetime.timedelta(seconds=args.timeout), **bound)
        self.pg = dist.distributed_c10d._get_default_group()
        self.sync = torch.cuda.synchronize if self.cuda else (lambda: None)
        self.first = {"init": time.perf_counter() - t0, **self.first_calls(args.sizes[0])}
        self.modes = ["sync", "async"] + (["event"] if self.cuda else []) + (
            ["raw"] if self.backend == "actorcc" else ["lib"] if self.backend == "nccl" else [])
        self.wrong, self.calls, self.lib_errors = 0, {}, {}
        want_sum = self.world * (self.world + 1) / 2
        for nbytes in args.sizes:
            x = torch.empty(nbytes // 4, dtype=torch.float32, device=self.dev)
            x.fill_(self.rank + 1)  # correctness first: one call on a known input
            dist.all_reduce(x)
            self.sync()
            if not bool((x == want_sum).all()):
                self.wrong += 1
            x.fill_(1.0 / (1 << 20))  # repeated sums stay finite and exact enough
            n = calls_for(nbytes, args)
            calls = {"sync": lambda x=x: dist.all_reduce(x)}
            if self.backend == "actorcc":
                calls["raw"] = (lambda c, x: lambda: c.all_reduce(x))(self.pg._comm(x), x)
            if self.backend == "nccl":
                try:
                    calls["lib"] = nccl_lib_call(torch, self.pg, x)
                except Exception as e:  # noqa: BLE001 - a diagnostic; reported, never fatal
                    self.lib_errors[nbytes] = f"{type(e).__name__}: {e}"
            for fn in calls.values():  # warm-up
                fn()
            self.sync()
            self.calls[nbytes] = (n, x, calls)

    def first_calls(self, nbytes):
        """Seconds of the group's first and second dist.all_reduce of `nbytes`, each synced."""
        x = self.torch.ones(nbytes // 4, dtype=self.torch.float32, device=self.dev)
        out = {}
        for which in ("first", "second"):
            t0 = time.perf_counter()
            self.dist.all_reduce(x)
            self.sync()
            out[which] = time.perf_counter() - t0
        return out

    def round(self, mode, nbytes):
        """Seconds per call of one round: n calls of `mode` at `nbytes`, then a sync, / n (None
        where the mode does not apply to this variant)."""
        n, x, calls = self.calls[nbytes]
        if mode not in self.modes or (mode in ("lib", "raw") and mode not in calls):
            return None
        dist, sync = self.dist, self.sync
        if mode == "async":
            dist.barrier()
            t0 = time.perf_counter()
            works = [dist.all_reduce(x, async_op=True) for _ in range(n)]
            for w in works:
                w.wait()
            sync()
            return (time.perf_counter() - t0) / n
        if mode == "event":
            fn = calls["sync"]
            dist.barrier()
            s, e = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(n):
                fn()
            e.record()
            self.torch.cuda.synchronize()
            return s.elapsed_time(e) / 1e3 / n
        fn = calls[mode]
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        return (time.perf_counter() - t0) / n

    def rows(self, figures):
        """The result rows: `figures(mode, nbytes)` gives each mode's figure (or None)."""
        out = []
        for nbytes in self.args.sizes:
            row = {"bytes": nbytes, "iters": self.calls[nbytes][0]}
            for m in self.modes:
                v = figures(m, nbytes)
                if v is not None:
                    row[m] = v
            if nbytes in self.lib_errors:
                row["lib_error"] = self.lib_errors[nbytes]
            out.append(row)
        return out

    def graphs(self, rows):
        """Graphs last: a capture leaves state behind in torch and in the library (private
        memory pools, a stream's capture history), which must not weigh on the eager figures."""
        if not self.cuda:
            return
        for row in rows:
            x = self.torch.zeros(row["bytes"] // 4, dtype=self.torch.float32, device=self.dev)
            row["graph"] = graph_time(self.torch, self.dist, x, row["iters"], self.args, self.rank, self.world)
            if row["graph"] is None:
                row.pop("graph")
                row["graph_error"] = graph_time.last_error

    def close(self):
        self.dist.barrier()
        self.dist.destroy_process_group()


def rank_main(args):
    """A rank on its own: every size and mode, the median of -r rounds each."""
    rb = RankBench(args)

    def figure(mode, nbytes):
        got = [rb.round(mode, nbytes) for _ in range(args.rounds)]
        return None if None in got else statistics.median(got)
    rows = rb.rows(figure)
    rb.graphs(rows)
    rb.close()
    return {"rank": rb.rank, "rows": rows, "wrong": rb.wrong, "first": rb.first}


def rank_serve(args):
    """A rank in the interleaved mode: ready once its group is up and its sizes are checked,
    then one round per command read from stdin ("round MODE BYTES", answered with the seconds
    per call or "-"), until "finish" (graphs, then the rows as JSON) or end of input."""
    rb = RankBench(args)
    print(f"@@ready {json.dumps({'wrong': rb.wrong, 'first': rb.first})}", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[:1] == ["round"]:
            v = rb.round(cmd[1], int(cmd[2]))
            print(f"@@round {'-' if v is None else repr(v)}", flush=True)
        elif cmd[:1] == ["finish"]:
            rows = rb.rows(lambda m, b: None)
            rb.graphs(rows)
            rb.close()
            print(f"@@rows {json.dumps(rows)}", flush=True)
            return


def nccl_lib_call(torch, pg, x):
    """A function making one in-place float32 sum ncclAllReduce of `x` on torch's NCCL
    communicator, through the libnccl.so.2 this process uses: dlopen by soname returns the
    library already loaded under it (the preloaded one where LD_PRELOAD names one)."""
    import ctypes
    comm = ctypes.c_void_p(pg._get_backend(x.device)._comm_ptr())
    fn = ctypes.CDLL("libnccl.so.2").ncclAllReduce
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                   ctypes.c_void_p]
    fn.restype = ctypes.c_int
    buf, count = ctypes.c_void_p(x.data_ptr()), ctypes.c_size_t(x.numel())
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    float32, ncclsum = 7, 0  # ncclFloat32, ncclSum

    def call():
        rc = fn(buf, buf, count, float32, ncclsum, comm, stream)
        if rc != 0:
            raise RuntimeError(f"ncclAllReduce returned {rc}")
    return call


def graph_time(torch, dist, x, n, args, rank, world):
    """Seconds per call of dist.all_reduce captured in a CUDA graph (k calls in one graph,
    replayed). A one-call graph is checked first (input rank + 1 -> the sum, replayed with a
    fresh input). None (and graph_time.last_error) where capture or the check failed."""
    k = min(n, args.graph_calls)
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up outside the capture, as torch.cuda.graph asks
            dist.all_reduce(x)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        one = torch.cuda.CUDAGraph()
        with torch.cuda.graph(one):
            dist.all_reduce(x)
        for base in (rank + 1, 2 * rank + 3):
            x.fill_(base)
            one.replay()
            torch.cuda.synchronize()
            want = sum(2 * r + 3 if base != rank + 1 else r + 1 for r in range(world))
            if not bool((x == want).all()):
                graph_time.last_error = f"wrong result after replay: {x[:4].tolist()} (want {want})"
                return None
        x.zero_()  # the timed graph sums zeros: stays finite
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(k):
                dist.all_reduce(x)
        reps = max(1, n // k)
        rounds = []
        for _ in range(args.rounds):
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                g.replay()
            torch.cuda.synchronize()
            rounds.append((time.perf_counter() - t0) / (reps * k))
        return statistics.median(rounds)
    except Exception as e:  # noqa: BLE001 - reported in the results
        graph_time.last_error = f"{type(e).__name__}: {e}"
        return None


graph_time.last_error = None


# ---- the driver -------------------------------------------------------------------------------
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
        cmd = [sys.executable, os.path.abspath(__file__), "--rank-of", variant, "--port", str(port)] + args.forward
        cpus = cpus_of_rank(args.cpus, r, world)
        if cpus:
            cmd += ["--cpu-set", ",".join(map(str, cpus))]
        procs.append(subprocess.Popen(cmd + extra(r), env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT))
    return procs, None


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
    """The first-call figures of one group from every rank's (see "First call"), in ms."""
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


def print_first(entries, world, out):
    if not entries:
        return
    print(f"# world {world}: first dist.all_reduce after init_process_group ({fmt_bytes(entries[0]['bytes'])}), "
          f"ms, slowest rank [fastest]", file=out)
    for e in entries:
        print(f"  {e['variant']:>13}  init {e['init_ms']:9.2f} [{e['init_min_ms']:.2f}]  first call "
              f"{e['first_ms']:9.2f} [{e['first_min_ms']:.2f}]  second call {e['second_ms']:8.2f} "
              f"[{e['second_min_ms']:.2f}]", file=out)


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


PAIRS = (("nccl-actorcc", "nccl"), ("actorcc", "nccl"), ("actorcc", "gloo"))


def paired(by_variant, trial_of, world, label="trials"):
    """Trial-by-trial ratios of each pair of variants that both ran (see "Pairs" above); a
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
