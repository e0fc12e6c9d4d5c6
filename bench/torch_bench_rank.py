"""One rank of bench/torch_bench.py: its torch.distributed group, a tensor per size (each
checked once), one timed round of a mode at a size, the CUDA graph timing, and the two ways a rank
runs (on its own, or serving the driver's rounds in the interleaved mode)."""
from __future__ import annotations

import datetime
import json
import os
import statistics
import sys
import time


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
