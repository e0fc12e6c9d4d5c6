"""Suspend and resume on the GPU (its memory goal: the suspended ranks give back the GPU memory they held): scripts/device.sh's phase
`suspend`.

W ranks (default 4) share GPU 0 (ACTORCC_CUDA_SHARE_GPU=1), each in its own process, beside a
baseline process that initialised CUDA the same way (the same torch tensors, actorcc imported)
but never made a communicator. This driver measures each process's GPU memory (nvidia-smi
--query-compute-apps by pid; where the pids are not visible, the device's used memory, shared
out) at each state: baseline, after init, after suspend, after resume; times resume() plus the
first all_reduce (synchronised) on every rank; then runs --cycles suspend/resume cycles with
exact all_reduce results (an LL-sized and a two-shot-sized call per cycle) and the suspended
memory measured in every cycle. PASS when:
  - after suspend every rank's process is within 2 MiB of the baseline process;
  - the slowest rank's resume + first all_reduce is under 20 ms;
  - every result of every cycle is exact;
  - the suspended memory does not grow over the cycles (last - first <= 1 MiB).
It prints one line
  SUSPEND-GPU PASS|FAIL ranks=W baseline=..MiB init=.. suspended=.. resumed=.. resume_ms=.. ...
and writes everything as JSON (--json). --device cpu runs the same on the CPU backend, with
each process's resident memory in place of GPU memory (a check of the script without a GPU;
its bars are not the goal's).

  python3 tests/python/suspend_device.py [--ranks 4] [--cycles 20] [--device cuda|cpu] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
import traceback

SMALL, LARGE = 1024, 4 << 20  # all_reduce elements (float32): the LL path and the two-shot path
SLACK_MIB = 2.0               # the goal: within 2 MiB of a process that never made the communicator
RESUME_MS = 20.0
GROWTH_MIB = 1.0


def _init_like_ranks(device):
    """What every process does with CUDA before (or without) a communicator."""
    import torch
    import actorcc  # noqa: F401  the library loaded as in the ranks
    if device == "cuda":
        torch.cuda.set_device(0)
    dev = torch.device("cuda:0" if device == "cuda" else "cpu")
    bufs = [torch.zeros(n, dtype=torch.float32, device=dev) for n in (SMALL, LARGE)]
    if device == "cuda":
        torch.cuda.synchronize()
    return torch, dev, bufs


def _release_cache(torch, device):
    # The ranks' checks leave freed temporaries in torch's caching allocator; the baseline makes
    # and frees the same ones. Both hand them back before a measurement, so what differs is
    # actorcc's.
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _baseline(conn, device):
    try:
        torch, dev, _ = _init_like_ranks(device)
        _want(torch, dev, 4, 0, LARGE).add_(_inputs(torch, dev, 0, 0, LARGE))
        _release_cache(torch, device)
        conn.send(("ready", os.getpid()))
        conn.recv()  # measured: exit
    except BaseException:  # noqa: BLE001 - reported to the driver
        conn.send(("error", traceback.format_exc()))


def _inputs(torch, dev, rank, cycle, n):
    # Small integers: every sum is exact in float32, and each depends on rank, cycle and position.
    i = torch.arange(n, device=dev, dtype=torch.int64)
    return ((i % 31) + 100 * rank + cycle).to(torch.float32)


def _want(torch, dev, world, cycle, n):
    i = torch.arange(n, device=dev, dtype=torch.int64)
    return ((i % 31) * world + 100 * world * (world - 1) // 2 + world * cycle).to(torch.float32)


def _rank(rank, world, uid, cycles, device, conn):
    try:
        torch, dev, bufs = _init_like_ranks(device)
        import actorcc
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        c = actorcc.Communicator(uid, rank, world, device=0 if device == "cuda" else "cpu", timeout=60, join_timeout=60)
        wrong = []

        def exact(cycle):
            for k, n in enumerate((SMALL, LARGE)):
                bufs[k].copy_(_inputs(torch, dev, rank, cycle, n))
                c.all_reduce(bufs[k])
            sync()
            for k, n in enumerate((SMALL, LARGE)):
                if not torch.equal(bufs[k], _want(torch, dev, world, cycle, n)):
                    bad = int((bufs[k] != _want(torch, dev, world, cycle, n)).sum())
                    wrong.append(f"rank {rank} cycle {cycle}: {bad} of {n} elements wrong")

        exact(-1)
        _release_cache(torch, device)
        conn.send(("init", os.getpid(), c.mem_stats()))
        conn.recv()
        c.suspend()
        _release_cache(torch, device)
        conn.send(("suspended", c.mem_stats()))
        conn.recv()  # all ranks go together: the resume is collective
        t0 = time.perf_counter()
        c.resume()
        bufs[0].copy_(_inputs(torch, dev, rank, 0, SMALL))
        c.all_reduce(bufs[0])
        sync()
        resume_ms = (time.perf_counter() - t0) * 1e3
        if not torch.equal(bufs[0], _want(torch, dev, world, 0, SMALL)):
            wrong.append(f"rank {rank}: the first all_reduce after resume is wrong")
        _release_cache(torch, device)
        conn.send(("resumed", resume_ms, c.mem_stats()))
        conn.recv()
        for k in range(cycles):
            exact(k)
            c.suspend()
            _release_cache(torch, device)
            conn.send(("cycle", k))
            conn.recv()
            c.resume()
        exact(cycles)
        conn.send(("done", wrong))
        c.close()
    except BaseException:  # noqa: BLE001 - reported to the driver
        conn.send(("error", traceback.format_exc()))


def _apps_mib():
    """{pid: MiB} of the compute processes on the GPUs (nvidia-smi), {} where it says nothing."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    apps = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            try:
                apps[int(parts[0])] = apps.get(int(parts[0]), 0.0) + float(parts[1])
            except ValueError:
                pass
    return apps


def _device_used_mib():
    try:
        out = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
        return float(out.split()[0])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return float("nan")


def _rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


class Meter:
    """Each process's memory: GPU memory by pid, else the device's used memory shared out among
    `share` processes above the idle level (cuda); resident memory (cpu)."""

    def __init__(self, device):
        self.device = device
        self.idle = _device_used_mib() if device == "cuda" else 0.0
        self.how = "rss" if device == "cpu" else "nvidia-smi pid"

    def per_process(self, pids):
        if self.device == "cpu":
            return [_rss_mib(p) for p in pids]
        apps = _apps_mib()
        if all(p in apps for p in pids):
            return [apps[p] for p in pids]
        # pids of another namespace: the device's total above idle, shared out.
        self.how = "device used / processes"
        used = _device_used_mib()
        return [(used - self.idle) / len(pids)] * len(pids)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--timeout", type=float, default=200.0)
    ap.add_argument("--json")
    a = ap.parse_args()
    os.environ["ACTORCC_CUDA_SHARE_GPU"] = "1"  # the ranks share GPU 0 (inherited by the spawned ranks)
    import actorcc
    ctx = mp.get_context("spawn")
    meter = Meter(a.device)
    deadline = time.monotonic() + a.timeout
    result = {"ranks": a.ranks, "cycles": a.cycles, "device": a.device}
    fails = []

    def recv(conn, what):
        left = deadline - time.monotonic()
        if left <= 0 or not conn.poll(left):
            raise RuntimeError(f"no '{what}' within the timeout")
        msg = conn.recv()
        if msg[0] == "error":
            raise RuntimeError(msg[1])
        if msg[0] != what:
            raise RuntimeError(f"expected '{what}', got {msg!r}")
        return msg

    # The baseline: CUDA as the ranks have it, no communicator.
    parent, child = ctx.Pipe()
    base = ctx.Process(target=_baseline, args=(child, a.device), daemon=True)
    base.start()
    _, base_pid = recv(parent, "ready")
    time.sleep(0.5)
    result["baseline_mib"] = meter.per_process([base_pid])[0]
    parent.send("exit")
    base.join(30)
    time.sleep(0.5)  # its memory is given back before the ranks measure against idle

    uid = str(actorcc.UniqueId.create("127.0.0.1"))
    conns, procs = [], []
    for r in range(a.ranks):
        p_end, c_end = ctx.Pipe()
        p = ctx.Process(target=_rank, args=(r, a.ranks, uid, a.cycles, a.device, c_end), daemon=True)
        p.start()
        conns.append(p_end)
        procs.append(p)
    try:
        def step(what):
            msgs = [recv(c, what) for c in conns]
            return msgs

        def go():
            for c in conns:
                c.send("go")

        init = step("init")
        pids = [m[1] for m in init]
        result["stats_init"] = init[0][2]
        result["init_mib"] = meter.per_process(pids)
        go()
        sus = step("suspended")
        time.sleep(0.3)
        result["stats_suspended"] = sus[0][1]
        result["suspended_mib"] = meter.per_process(pids)
        go()
        res = step("resumed")
        result["resume_ms"] = [m[1] for m in res]
        result["resumed_mib"] = meter.per_process(pids)
        go()
        per_cycle = []
        for k in range(a.cycles):
            step("cycle")
            per_cycle.append(max(meter.per_process(pids)))
            go()
        result["cycle_suspended_mib"] = per_cycle
        wrong = [w for m in step("done") for w in m[1]]
        result["wrong"] = wrong
        result["measured_by"] = meter.how
    except Exception as e:  # noqa: BLE001 - the verdict says what failed
        fails.append(f"run: {e}")
    finally:
        for p in procs:
            p.join(20)
            if p.is_alive():
                p.kill()

    if not fails:
        over = max(result["suspended_mib"]) - result["baseline_mib"]
        result["suspended_over_baseline_mib"] = over
        if a.device == "cuda" and over > SLACK_MIB:
            fails.append(f"suspended process {over:.1f} MiB above the baseline (bar {SLACK_MIB})")
        if a.device == "cuda" and max(result["resume_ms"]) >= RESUME_MS:
            fails.append(f"resume + first all_reduce {max(result['resume_ms']):.1f} ms (bar {RESUME_MS})")
        if result["wrong"]:
            fails.append(f"{len(result['wrong'])} wrong results: {result['wrong'][:3]}")
        growth = per_cycle[-1] - per_cycle[0] if per_cycle else 0.0
        result["growth_mib"] = growth
        if growth > GROWTH_MIB and a.device == "cuda":
            fails.append(f"suspended memory grew {growth:.1f} MiB over {a.cycles} cycles")
        if result["stats_suspended"]["suspendable_bytes"] != 0 or not result["stats_suspended"]["suspended"]:
            fails.append(f"mem_stats while suspended: {result['stats_suspended']}")
    result["fails"] = fails
    verdict = "PASS" if not fails else "FAIL"
    fmt = lambda v: f"{max(v):.1f}" if isinstance(v, list) else f"{v:.1f}"  # noqa: E731
    line = f"SUSPEND-GPU {verdict} ranks={a.ranks} device={a.device}"
    for key in ("baseline_mib", "init_mib", "suspended_mib", "resumed_mib", "resume_ms", "growth_mib"):
        if key in result:
            line += f" {key}={fmt(result[key])}"
    line += f" cycles={a.cycles} measured_by={result.get('measured_by', '-')}"
    print(line)
    for f in fails:
        print("  " + f)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if not fails else 1


if __name__ == "__main__":
    sys.exit(main())
