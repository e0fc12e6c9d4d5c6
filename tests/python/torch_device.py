"""The torch.distributed backend on GPUs: scripts/device.sh's phase `torch`.

W ranks (default 2; they share the GPUs where fewer are lent: ACTORCC_CUDA_SHARE_GPU=1 for
actorcc, and a different NCCL_HOSTID per rank, without which NCCL refuses two ranks on one
GPU) each run in one process with two groups over the same ranks: the world on backend
"actorcc" and a new_group on "nccl". On each group, in the same run:
  - the collective matrix (torch_workers.matrix: every call, dtype and size, the values
    depending on rank and position, outputs poisoned);
  - DDP on a small model for N steps, plain and with a comm hook, and FSDP2 (fully_shard):
    the parameters identical on every rank and equal to a single-process run;
  - the time of a DDP step (a 4-layer MLP) and of dist.all_reduce at a few sizes, the two
    backends in turn in the same processes;
  - (CUDA) a rank that skips a call on a group of 2 s timeout: the other's pending Work
    raises from is_completed(), naming it.
It prints each rank's failures, a table of the times and one line
  TORCH-DEVICE PASS|FAIL ranks=W ...
and writes the numbers as JSON with --json. --device cpu runs the same on CPU tensors with
gloo in place of NCCL (a check of the script on a machine without a GPU).

  python3 tests/python/torch_device.py [--ranks 2] [--steps 5] [--device cuda|cpu] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_workers  # noqa: E402
from conftest import free_port  # noqa: E402
from mp_helpers import run_ranks  # noqa: E402

SIZES = (4 << 10, 64 << 10, 1 << 20, 16 << 20)  # all_reduce bytes (float32)


def _timed(fn, iters, device):
    """Seconds per call of fn(), median of 3 rounds of `iters` calls (each round synchronised)."""
    import torch
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    fn()
    sync()
    rounds = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        rounds.append((time.perf_counter() - t0) / iters)
    return statistics.median(rounds)


def _ddp_step_time(group, device, rank):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    dev = torch.device(device)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
    m = DDP(torch.nn.Sequential(*layers).to(dev), process_group=group,
            device_ids=[dev.index or 0] if dev.type == "cuda" else None)
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(32, 1024, generator=g).to(dev), torch.randn(32, 1024, generator=g).to(dev)

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(m(x), y).backward()
        opt.step()
    return _timed(step, 5, device)


def _raised(work, seconds):
    """The error work.is_completed() raises within `seconds` (None: it completed, or not yet)."""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            work.is_completed()
            time.sleep(0.01)
    except Exception as e:  # noqa: BLE001 - the error under test
        return e
    return None


def _stalled_peer(rank, device):
    """On a group of 2 s timeout, rank 1 skips a call: rank 0's pending Work must raise from
    is_completed() (its kernel gave up) naming rank 1 within ~4 s, and rank 1's next call
    must fail too (the group was aborted). Returns the failures."""
    import torch
    import torch.distributed as dist
    from datetime import timedelta
    g = dist.new_group(backend="actorcc", timeout=timedelta(seconds=2))
    x = torch_workers._values(rank, 990, 4099, torch.float32, device)
    dist.all_reduce(x, group=g)  # the communicator exists on both ranks before the stall
    torch.cuda.synchronize()
    fails = []
    if rank == 0:
        t0 = time.monotonic()
        e = _raised(dist.all_reduce(x, group=g, async_op=True), 8)
        if e is None or "rank 1" not in str(e) or time.monotonic() - t0 > 6:
            fails.append(f"stalled peer: rank 0's Work after {time.monotonic() - t0:.1f} s: {e!r}")
    elif rank == 1:
        time.sleep(4)
    if rank in (0, 1):
        try:  # raises at once (the abort is known) or once its kernel gives up
            e = _raised(dist.all_reduce(x, group=g, async_op=True), 4)
        except Exception as err:  # noqa: BLE001 - expected: the group was aborted
            e = err
        if e is None:
            fails.append(f"stalled peer: rank {rank}'s call after the abort did not fail")
    return fails


def rank_main(rank, world, port, device_kind, steps):
    import torch
    import torch.distributed as dist
    import actorcc.torch  # noqa: F401  registers the backend
    if device_kind == "cuda":
        torch.cuda.set_device(0)  # each rank sees one GPU (CUDA_VISIBLE_DEVICES)
        device = "cuda:0"
    else:
        device = "cpu"
    dist.init_process_group("actorcc", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    other = "nccl" if device_kind == "cuda" else "gloo"
    groups = {"actorcc": None, other: dist.new_group(backend=other)}
    out = {"fails": {}, "seconds": {}, "ddp_step_ms": {}, "all_reduce_us": {}}
    for name, g in groups.items():
        t0 = time.monotonic()
        fails = torch_workers.matrix(rank, world, name, group=g, device=device)
        for hook in (False, True):
            fails += torch_workers.ddp_matches_reference(rank, world, steps, hook, group=g, device=device)
        fails += torch_workers.fsdp2_matches_reference(rank, world, steps, group=g, device=device)
        out["fails"][name] = fails
        out["seconds"][name] = round(time.monotonic() - t0, 2)
    for name, g in groups.items():
        dist.barrier()
        out["ddp_step_ms"][name] = round(_ddp_step_time(g, device, rank) * 1e3, 3)
    for nbytes in SIZES:
        x = torch.randn(nbytes // 4, device=device)
        iters = 20 if nbytes <= (1 << 20) else 5
        for name, g in groups.items():
            dist.barrier()
            t = _timed(lambda: dist.all_reduce(x, group=g), iters, device)
            out["all_reduce_us"].setdefault(str(nbytes), {})[name] = round(t * 1e6, 1)
    if device_kind == "cuda":
        out["fails"]["actorcc"] += _stalled_peer(rank, device)
    dist.destroy_process_group()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--json")
    ap.add_argument("--timeout", type=float, default=85)
    a = ap.parse_args()
    ngpu = 0
    if a.device == "cuda":
        import torch
        ngpu = torch.cuda.device_count()
        if not ngpu:
            print("TORCH-DEVICE FAIL: no CUDA device (use --device cpu)")
            return 1
    shared = a.device == "cuda" and a.ranks > ngpu

    def env(r):
        e = {}
        if a.device == "cuda":
            e["CUDA_VISIBLE_DEVICES"] = str(r % ngpu)
        if shared:
            e.update(ACTORCC_CUDA_SHARE_GPU="1", NCCL_HOSTID=f"torch-rank{r}")
        return e

    t0 = time.monotonic()
    res = run_ranks(a.ranks, rank_main, free_port(), a.device, a.steps, timeout=a.timeout, env=env,
                    expect_errors=True)
    wall = time.monotonic() - t0
    bad = [f"rank {r}: {kind} {info if kind != 'err' else info['tb']}" for r, (kind, info) in enumerate(res)
           if kind != "ok"]
    outs = [info for kind, info in res if kind == "ok"]
    nfail = 0
    for r, o in enumerate(outs):
        for name, fails in o["fails"].items():
            nfail += len(fails)
            for f in fails:
                print(f"rank {r} [{name}]: {f}")
    for b in bad:
        print(b)
    summary = {"ranks": a.ranks, "gpus": ngpu, "shared_gpu": shared, "device": a.device, "wall_s": round(wall, 1),
               "failures": nfail, "errors": bad}
    if outs and not bad:
        names = list(outs[0]["fails"])
        # The slowest rank's time: a collective is done when the last rank is.
        summary["check_seconds"] = {n: max(o["seconds"][n] for o in outs) for n in names}
        summary["ddp_step_ms"] = {n: max(o["ddp_step_ms"][n] for o in outs) for n in names}
        summary["all_reduce_us"] = {s: {n: max(o["all_reduce_us"][s][n] for o in outs) for n in names}
                                    for s in outs[0]["all_reduce_us"]}
        print(f"{'':>24}" + "".join(f"{n:>12}" for n in names) + f"{'ratio':>8}")
        print(f"{'DDP step (ms)':>24}" + "".join(f"{summary['ddp_step_ms'][n]:>12}" for n in names)
              + f"{summary['ddp_step_ms'][names[0]] / summary['ddp_step_ms'][names[1]]:>8.2f}")
        for s, by in summary["all_reduce_us"].items():
            print(f"{'all_reduce ' + _size(int(s)) + ' (us)':>24}" + "".join(f"{by[n]:>12}" for n in names)
                  + f"{by[names[0]] / by[names[1]]:>8.2f}")
    ok = not bad and nfail == 0 and len(outs) == a.ranks
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    print(f"TORCH-DEVICE {'PASS' if ok else 'FAIL'} ranks={a.ranks} gpus={ngpu} device={a.device} "
          f"failures={nfail} errors={len(bad)} wall={wall:.1f}s")
    return 0 if ok else 1


def _size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


if __name__ == "__main__":
    sys.exit(main())
