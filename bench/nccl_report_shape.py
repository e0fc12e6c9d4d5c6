#!/usr/bin/env python3
"""The report's script shape on whatever NCCL the environment gives: Ray-style processes, one
GPU each (CUDA_VISIBLE_DEVICES masked to one GPU, ranks sharing GPUs when fewer are lent),
started one by one 0.5-1 s apart, each calling torch.distributed.init_process_group("nccl") and
all_reduce from 4 KB to 1 GiB, every result checked. Nothing in it names actorcc: run it once
with actorcc's library turned on and once without,

    env $(python -m actorcc.nccl --env | sed 's/^export //') python bench/nccl_report_shape.py --world 2
    python bench/nccl_report_shape.py --world 2 [--hostid-per-rank]   # NVIDIA's NCCL

(--hostid-per-rank gives every rank its own NCCL_HOSTID: NVIDIA's NCCL refuses ranks sharing a
GPU otherwise). `--backend actorcc` runs the same on torch's "actorcc" backend and
`--backend actorcc-api` on actorcc.Communicator itself, the baselines for the library's
start-up and first call. Prints per rank the library serving its calls, the start-up figures (process
start to init_process_group's return, and the first 4 KB all_reduce, which is where torch creates
the communicator: an early rank's includes waiting for the later ones), the time per size, and
one line `REPORTSHAPE PASS|FAIL world=W ...` with the group's first call counted from the last
rank's init call's return and, the figure to compare across modes, the group's first result
counted from the last rank's entry into its init call; --json writes it all. --device-id passes
device_id to init_process_group, where torch then creates the communicator.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

from bench_common import free_port

SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30]


def rank_main(args):
    t_start = float(os.environ["REPORT_T_START"])
    import torch
    import torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # gloo: CI's check of this script on the CPU; the actorcc modes run on CPU tensors too where
    # no GPU is usable (CI)
    cpu = args.backend == "gloo" or (args.backend.startswith("actorcc") and not torch.cuda.is_available())
    dev = "cpu" if cpu else "cuda"
    if not cpu:
        torch.cuda.set_device(0)  # the one GPU this process sees
    if args.backend.startswith("actorcc"):
        import actorcc
        import actorcc.torch  # noqa: F401  (registers the "actorcc" backend)
    t_import = time.time()
    if args.backend == "actorcc-api":  # actorcc's own Communicator, the id from the launcher
        comm = actorcc.Communicator(os.environ["REPORT_ACTORCC_ID"], rank, world,
                                    **({"backend": "cpu"} if cpu else {"device": 0}))
        all_reduce, barrier, finish = comm.all_reduce, comm.host_barrier, comm.close
        sync = (lambda: None) if cpu else comm.synchronize
    else:
        # --device-id: torch creates the communicator inside init_process_group, not in the first call
        dist.init_process_group(args.backend, **({"device_id": torch.device(dev, 0)} if args.device_id and not cpu
                                                  else {}))
        all_reduce, barrier, finish = dist.all_reduce, dist.barrier, dist.destroy_process_group
        sync = (lambda: None) if cpu else torch.cuda.synchronize
    t_init = time.time()
    small = torch.full((1024,), float(rank + 1), device=dev)
    t_tensor = time.time()  # the tensor's allocation and fill queued: what precedes the call itself
    all_reduce(small)
    sync()
    t_first = time.time()
    want = world * (world + 1) / 2
    wrong = int((small != want).sum())
    rows = []
    for size in SIZES[: args.max_index + 1]:
        n = size // 4
        t = torch.full((n,), float(rank + 1), device=dev)
        all_reduce(t)  # warm-up and check
        sync()
        wrong += int((t != want).sum())
        iters = 20 if size <= (1 << 20) else 3
        t0 = time.perf_counter()
        for _ in range(iters):
            all_reduce(t)
        sync()
        us = (time.perf_counter() - t0) / iters * 1e6
        # after iters more sums every element is want * world**iters: check it exactly where
        # float32 holds it, else just for finiteness
        exp = want * world ** iters
        if exp < 2 ** 24:
            wrong += int((t != exp).sum())
        else:
            wrong += int((~torch.isfinite(t)).sum())
        rows.append({"bytes": size, "time_us": us})
        del t
    barrier()
    if args.backend.startswith("actorcc"):
        version, lib = "none (actorcc " + actorcc.__version__ + ")", None
    else:
        version = torch.cuda.nccl.version() if not cpu else "none (gloo)"
        lib = serving_library() if not cpu else None
    out = {"rank": rank, "world": world, "startup_s": t_init - t_start, "import_s": t_import - t_start,
           "init_s": t_init - t_import, "first_call_s": t_first - t_init, "first_tensor_s": t_tensor - t_init,
           "wrong": wrong, "sizes": rows,
           "nccl_version": ".".join(map(str, version)) if isinstance(version, tuple) else str(version),
           "library": lib, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
           "init_entered": t_import, "init_done": t_init, "first_done": t_first}
    print("RANKRESULT " + json.dumps(out), flush=True)
    finish()
    return 0 if wrong == 0 else 1


def serving_library():
    """The file whose ncclAllReduce the process's calls bind to: torch maps NVIDIA's libnccl even
    when a preloaded one serves, so the first libnccl in /proc/self/maps may be the unused one."""
    import ctypes

    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                    ("saddr", ctypes.c_void_p)]
    scope = ctypes.CDLL(None)
    try:
        addr = ctypes.cast(scope.ncclAllReduce, ctypes.c_void_p)
    except AttributeError:  # not in the global scope (torch loaded NCCL privately)
        return next((line.split()[-1] for line in open("/proc/self/maps") if "libnccl" in line), None)
    info = DlInfo()
    dladdr = scope.dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    return os.path.realpath(info.fname.decode()) if dladdr(addr, ctypes.byref(info)) and info.fname else None


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
        return max(1, sum(1 for line in out.splitlines() if line.startswith("GPU ")))
    except (OSError, subprocess.TimeoutExpired):
        return 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--max-bytes", default="1G", help="largest all_reduce (4K ... 1G)")
    p.add_argument("--stagger", type=float, nargs=2, default=(0.5, 1.0), metavar=("MIN", "MAX"),
                   help="seconds between two processes' starts (uniform in [MIN, MAX])")
    p.add_argument("--hostid-per-rank", action="store_true", help="NCCL_HOSTID per rank (NVIDIA's NCCL, shared GPU)")
    p.add_argument("--device-id", action="store_true",
                   help="init_process_group(..., device_id=cuda:0): the communicator made at init, not at the first call")
    p.add_argument("--timeout", type=float, default=240)
    p.add_argument("--json", help="write the ranks' results here")
    p.add_argument("--backend", default="nccl", choices=("nccl", "gloo", "actorcc", "actorcc-api"),
                   help="gloo: CPU tensors (checks the script); actorcc: torch's \"actorcc\" backend; actorcc-api: "
                        "actorcc.Communicator itself (the id made here, its root in this process)")
    p.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    top = int(args.max_bytes[:-1]) * units[args.max_bytes[-1].upper()]
    args.max_index = max(i for i, s in enumerate(SIZES) if s <= top)
    if args.rank_main:
        return rank_main(args)
    ngpu, port = gpu_count(), free_port()
    if args.backend == "actorcc-api":
        import actorcc
        os.environ["REPORT_ACTORCC_ID"] = str(actorcc.UniqueId.create("127.0.0.1"))
    procs = []
    t_launch = time.time()
    for r in range(args.world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.world), LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), CUDA_VISIBLE_DEVICES=str(r % ngpu), REPORT_T_START=repr(time.time()))
        if args.world > ngpu:
            env["ACTORCC_CUDA_SHARE_GPU"] = "1"  # actorcc's library: ranks may share a GPU (tests)
            if args.hostid_per_rank:
                env["NCCL_HOSTID"] = f"report-shape-{r}"
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank-main", "--backend", args.backend,
                                       "--max-bytes", args.max_bytes] + (["--device-id"] if args.device_id else []),
                                      env=env, stdout=subprocess.PIPE, text=True))
        if r < args.world - 1:
            time.sleep(random.uniform(*args.stagger))
    results, failed = [], []
    deadline = time.monotonic() + args.timeout
    for r, pr in enumerate(procs):
        try:
            out, _ = pr.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            failed.append(f"rank {r} did not finish within {args.timeout:.0f} s")
            continue
        got = [json.loads(line[len("RANKRESULT "):]) for line in out.splitlines() if line.startswith("RANKRESULT ")]
        if pr.returncode != 0 or not got:
            failed.append(f"rank {r} exit {pr.returncode}")
        results += got
    for res in sorted(results, key=lambda x: x["rank"]):
        print(f"rank {res['rank']} GPU {res['cuda_visible_devices']}: NCCL {res['nccl_version']} ({res['library']}); "
              f"start-up {res['startup_s']:.2f} s (import {res['import_s']:.2f}, init {res['init_s']:.2f}), "
              f"first 4 KB all_reduce {res['first_call_s'] * 1e3:.1f} ms, wrong {res['wrong']}")
        print("    " + "  ".join(f"{s['bytes'] >> 10} KB: {s['time_us']:.0f} us" for s in res["sizes"]))
    wrong = sum(r["wrong"] for r in results)
    ok = not failed and wrong == 0 and len(results) == args.world
    first = max((r["first_call_s"] for r in results), default=float("nan"))
    # The first call waits for the last rank to arrive (the stagger): the group's own first-call
    # time counts from the last rank's init_process_group to the last rank's first result.
    group_first = (max(r["first_done"] for r in results) - max(r["init_done"] for r in results)) if results \
        else float("nan")
    # From the last rank's entry into its init call: what the last arrival waits for in all, the
    # communicator's creation included wherever it happens (actorcc.Communicator's constructor,
    # init_process_group with --device-id, torch's first call otherwise).
    arrival_first = (max(r["first_done"] for r in results) - max(r["init_entered"] for r in results)) if results \
        else float("nan")
    startup = max((r["startup_s"] for r in results), default=float("nan"))
    print(f"REPORTSHAPE {'PASS' if ok else 'FAIL'} world={args.world} wrong={wrong} slowest start-up {startup:.2f} s, "
          f"slowest first call {first * 1e3:.1f} ms (after the last arrival {group_first * 1e3:.1f} ms), "
          f"last arrival -> first result {arrival_first * 1e3:.1f} ms, "
          f"wall {time.time() - t_launch:.1f} s"
          + (f" ({'; '.join(failed)})" if failed else ""), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"world": args.world, "pass": ok, "ranks": results, "failed": failed,
                       "first_call_after_last_arrival_s": group_first,
                       "last_arrival_to_first_result_s": arrival_first}, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
