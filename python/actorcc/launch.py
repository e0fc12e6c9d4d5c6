"""A process launcher with the traits of GPU actors, for running a group without Ray.

    from actorcc.launch import run_per_gpu
    results = run_per_gpu(work, world=8, args=(uid,), stagger=2.0)   # work(rank, world, uid)

Each rank is a fresh (spawned) process that sees only its own GPU: CUDA_VISIBLE_DEVICES is
masked to one entry of `devices` before the process starts, as Ray does for an actor with
num_gpus=1. Ranks start `stagger` seconds apart, as actors come up one by one, and each joins
as soon as it is up. The group's UniqueId is made by the caller, so its root runs in the
launching process, like a Ray driver's.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import time
import traceback

__all__ = ["run_per_gpu", "host_gpu_count"]


def host_gpu_count(default: int = 1) -> int:
    """The GPUs nvidia-smi lists on this host (`default` where there is none or no nvidia-smi)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return default
    return sum(1 for line in out.splitlines() if line.startswith("GPU")) or default


def _rank_main(target, rank, world, args, conn):
    try:
        res = ("ok", target(rank, world, *args))
    except BaseException as e:  # noqa: BLE001 - reported to the launcher, which raises it
        res = ("err", f"rank {rank}: {e}\n{traceback.format_exc()}")
    try:
        conn.send(res)
    finally:
        conn.close()


def run_per_gpu(target, world: int, args: tuple = (), devices=None, stagger: float = 0.0) -> list:
    """Runs target(rank, world, *args) in `world` processes, rank r seeing only GPU
    devices[r % len(devices)] (default: GPU r), and returns what each returned, by rank.

    `target` and `args` must be picklable (a module-level function). Raises RuntimeError
    with every failed rank's error and traceback once all ranks have ended; a rank that
    died without a word is reported with its exit code."""
    devices = list(range(world)) if devices is None else list(devices)
    ctx = mp.get_context("spawn")
    procs, conns = [], []
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        for r in range(world):
            # Inherited from the start: set before the child's interpreter (and CUDA) exists.
            os.environ["CUDA_VISIBLE_DEVICES"] = str(devices[r % len(devices)])
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_rank_main, args=(target, r, world, args, child))
            p.start()
            child.close()
            procs.append(p)
            conns.append(parent)
            if r < world - 1 and stagger > 0:
                time.sleep(stagger)
    finally:
        if saved is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved
    results, errors = [], []
    for r, (p, c) in enumerate(zip(procs, conns)):
        try:
            kind, val = c.recv()
        except EOFError:
            p.join()
            kind, val = "err", f"rank {r}: the process ended (exit code {p.exitcode}) without a result"
        (results if kind == "ok" else errors).append(val)
    for p in procs:
        p.join()
    if errors:
        raise RuntimeError("\n".join(errors))
    return results
