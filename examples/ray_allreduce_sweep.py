#!/usr/bin/env python3
"""All-reduce latency sweep in GPU actors: actorcc vs torch.distributed (NCCL), same actors.

    python examples/ray_allreduce_sweep.py --world 8               # Ray actors, num_gpus=1 each
    python examples/ray_allreduce_sweep.py --world 8 --no-ray      # same logic, no Ray needed

N actors with num_gpus=1 (each sees only its own GPU: CUDA_VISIBLE_DEVICES masked by Ray)
form one actorcc group (actorcc.ray.create_group, root in the driver) and one
torch.distributed NCCL group, then all-reduce float32 tensors from 1K to 233M elements on both
and print the latency of each per size (mean over --iters back-to-back calls timed with CUDA
events, the slowest rank's figure).

--no-ray runs the very same SweepWorker under actorcc.launch, a process launcher that reproduces
the actor traits: one process per GPU with CUDA_VISIBLE_DEVICES masked to that GPU (optionally
permuted), started --stagger seconds apart, each joining as soon as it is up.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time


def default_sizes():
    sizes, n = [], 1024
    while n <= 64 * 2**20:
        sizes.append(n)
        n *= 4
    sizes.append(233 * 2**20)
    return sizes


def parse_count(s):
    s = s.strip().upper()
    mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(s[-1:], 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def fmt_count(n):
    for unit, f in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= f and n % f == 0:
            return f"{n // f}{unit}"
    return str(n)


class SweepWorker:
    """The per-GPU logic (a Ray actor class, or a plain object in --no-ray processes)."""

    def __init__(self, rank, world):
        import torch
        self.rank, self.world = rank, world
        torch.cuda.set_device(0)  # the only GPU this process sees
        self.torch = torch
        self.comm = None
        self.pg = None
        self.visible = os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")

    def node_ip(self):
        try:
            import ray
            return ray.util.get_node_ip_address()
        except ImportError:
            return "127.0.0.1"

    def pick_port(self):
        return free_port()

    def join_actorcc(self, uid, timeout=120.0):
        """--no-ray path (with Ray, actorcc.ray.create_group does this)."""
        import actorcc
        self.comm = actorcc.Communicator(uid, self.rank, self.world, timeout=timeout)
        return self.comm.backend

    def use_ray_group(self, name):
        import actorcc.ray
        self.comm = actorcc.ray.get_group(name)
        return self.comm.backend

    def join_nccl(self, addr, port):
        import torch.distributed as dist
        t0 = time.monotonic()
        dist.init_process_group("nccl", init_method=f"tcp://{addr}:{port}", rank=self.rank,
                                world_size=self.world, device_id=self.torch.device("cuda", 0))
        self.pg = dist.group.WORLD
        return time.monotonic() - t0

    def _time(self, fn, t, iters, warmup):
        torch = self.torch
        for _ in range(warmup):
            fn(t)
        torch.cuda.synchronize()
        self.comm.host_barrier()  # start together
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn(t)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / iters  # us per call

    def run(self, sizes, iters, warmup, large_iters, nccl=True):
        import torch.distributed as dist
        torch = self.torch
        out = []
        first = {}
        for n in sizes:
            it = iters if n * 4 < 64 * 2**20 else large_iters
            t = torch.ones(n, dtype=torch.float32, device="cuda")
            # correctness once (and the first-call cost, which NCCL is known to pay heavily)
            t0 = time.monotonic()
            self.comm.all_reduce(t)
            torch.cuda.synchronize()
            first.setdefault("actorcc", time.monotonic() - t0)
            ok = bool((t == self.world).all().item())
            t.zero_()  # sums of zeros stay finite over any number of iterations
            row = {"count": n, "bytes": n * 4, "ok": ok,
                   "actorcc_us": self._time(self.comm.all_reduce, t, it, warmup)}
            if nccl and self.pg is not None:
                if "nccl" not in first:
                    t0 = time.monotonic()
                    dist.all_reduce(t)
                    torch.cuda.synchronize()
                    first["nccl"] = time.monotonic() - t0
                row["nccl_us"] = self._time(lambda x: dist.all_reduce(x), t, it, warmup)
            out.append(row)
            del t
            torch.cuda.empty_cache()
        return {"rank": self.rank, "visible": self.visible, "rows": out, "first_call_s": first,
                "backend": self.comm.backend}

    def shutdown(self):
        import torch.distributed as dist
        if self.pg is not None:
            dist.destroy_process_group()
        if self.comm is not None:
            self.comm.close()


def merge(results):
    """Slowest rank per size (collectives end together; the max is the honest figure)."""
    rows = []
    for i, r0 in enumerate(results[0]["rows"]):
        row = dict(r0)
        for key in ("actorcc_us", "nccl_us"):
            vals = [res["rows"][i].get(key) for res in results if res["rows"][i].get(key) is not None]
            if vals:
                row[key] = max(vals)
        row["ok"] = all(res["rows"][i]["ok"] for res in results)
        rows.append(row)
    return rows


def print_table(rows, results, header):
    print(header)
    print(f"  ranks see CUDA_VISIBLE_DEVICES = {[r['visible'] for r in results]}, backend {results[0]['backend']}")
    fc = results[0]["first_call_s"]
    print("  first call (s): " + ", ".join(f"{k} {max(r['first_call_s'].get(k, 0) for r in results):.3f}" for k in fc))
    print(f"{'count':>8} {'bytes':>12} {'actorcc(us)':>12} {'nccl(us)':>12} {'nccl/actorcc':>13} ok")
    for r in rows:
        nccl = r.get("nccl_us")
        ratio = f"{nccl / r['actorcc_us']:.2f}x" if nccl else "-"
        print(f"{fmt_count(r['count']):>8} {r['bytes']:>12} {r['actorcc_us']:>12.1f} "
              f"{(f'{nccl:.1f}' if nccl else '-'):>12} {ratio:>13} {'yes' if r['ok'] else 'NO'}")


# ---- Ray mode ----------------------------------------------------------------------------

def run_ray(args, sizes):
    import ray
    import actorcc.ray
    ray.init(address=args.address)
    Actor = ray.remote(num_gpus=1)(SweepWorker)
    actors = [Actor.remote(r, args.world) for r in range(args.world)]
    actorcc.ray.create_group(actors, name="sweep", join_timeout=args.join_timeout, timeout=args.timeout)
    ray.get([a.use_ray_group.remote("sweep") for a in actors])
    if not args.no_nccl:
        addr = ray.get(actors[0].node_ip.remote())
        port = ray.get(actors[0].pick_port.remote())
        ray.get([a.join_nccl.remote(addr, port) for a in actors])
    results = ray.get([a.run.remote(sizes, args.iters, args.warmup, args.large_iters, not args.no_nccl)
                       for a in actors])
    ray.get([a.shutdown.remote() for a in actors])
    return results


# ---- --no-ray mode: a launcher with the actor traits --------------------------------------

def _proc_main(rank, world, uid, nccl_port, opts):
    w = SweepWorker(rank, world)
    w.join_actorcc(uid, opts["timeout"])
    if not opts["no_nccl"]:
        w.join_nccl("127.0.0.1", nccl_port)
    res = w.run(opts["sizes"], opts["iters"], opts["warmup"], opts["large_iters"], not opts["no_nccl"])
    w.shutdown()
    return res


def run_no_ray(args, sizes):
    import actorcc
    from actorcc.launch import run_per_gpu
    order = list(range(args.gpus or args.world))
    if args.permute:
        order = order[::-1]
    uid = str(actorcc.UniqueId.create("127.0.0.1"))  # the root runs in the launcher ("driver")
    opts = dict(sizes=sizes, iters=args.iters, warmup=args.warmup, large_iters=args.large_iters,
                timeout=args.timeout, no_nccl=args.no_nccl)
    try:
        return run_per_gpu(_proc_main, args.world, (uid, free_port(), opts), devices=order, stagger=args.stagger)
    except RuntimeError as e:
        raise SystemExit(str(e))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=None, help="actors (default: every GPU)")
    ap.add_argument("--no-ray", action="store_true", help="process launcher with actor traits instead of Ray")
    ap.add_argument("--address", default=None, help="Ray address (default: start a local Ray)")
    ap.add_argument("--gpus", type=int, default=None, help="--no-ray: GPUs to spread over (default: world)")
    ap.add_argument("--permute", action="store_true", help="--no-ray: give rank r the GPU world-1-r")
    ap.add_argument("--stagger", type=float, default=2.0, help="--no-ray: seconds between process starts")
    ap.add_argument("--sizes", default=None, help="comma-separated element counts (e.g. 1K,1M,233M)")
    ap.add_argument("--min", default="1K")
    ap.add_argument("--max", default="233M")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--large-iters", type=int, default=10, help="iterations for buffers >= 64 MB")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--join-timeout", type=float, default=300.0)
    ap.add_argument("--no-nccl", action="store_true", help="skip the torch.distributed NCCL baseline")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    if args.world is None:
        from actorcc.launch import host_gpu_count
        args.world = host_gpu_count(default=2)
    if args.sizes:
        sizes = [parse_count(s) for s in args.sizes.split(",")]
    else:
        lo, hi = parse_count(args.min), parse_count(args.max)
        sizes = [n for n in default_sizes() if lo <= n <= hi]
    results = run_no_ray(args, sizes) if args.no_ray else run_ray(args, sizes)
    rows = merge(results)
    mode = "--no-ray launcher" if args.no_ray else "Ray actors"
    print_table(rows, results, f"all_reduce float32 sum, {args.world} {mode}, one GPU each")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"mode": mode, "world": args.world, "rows": rows, "ranks": results}, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
