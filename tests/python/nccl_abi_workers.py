"""torch's own "nccl" backend on actorcc's libnccl.so.2 (device machine): W processes, each one
rank on GPU 0 (CUDA_VISIBLE_DEVICES=0, ACTORCC_CUDA_SHARE_GPU=1), the library preloaded.

    python tests/python/nccl_abi_workers.py --case matrix --world 3 [--logdir DIR] [--timeout S]

prints one verdict line, `NCCLABI <case> world=W: PASS|FAIL (...)`, and exits 0 on PASS.
Cases (each rank checks every result against a float64 reference built from every rank's
inputs, which every rank can regenerate from the seed):
  matrix   all_reduce (every op incl. AVG and PREMUL_SUM, every dtype torch maps incl. bool;
           float8 where torch allows it), all_gather_into_tensor, reduce_scatter_tensor,
           broadcast, reduce, all_to_all_single (even and uneven), gather, scatter, odd sizes
  train    DDP and FSDP2 (fully_shard, odd layer sizes) against a single-process reference
  groups   new_group split from a bound device (init_process_group(device_id=...)) and fresh
           (no device_id), batch_isend_irecv, lone send/recv, destroy_process_group then init again
  fresh    as groups, without device_id (every new_group is a fresh communicator)
  kill     the last rank SIGKILLs itself; the others' Work.wait() must raise within the bound,
           naming it (TORCH_NCCL_BLOCKING_WAIT=1)
  killwd   the same under torch's default error handling: the watchdog must end the others
           within the bound, its message naming the dead rank
  stall    the last rank stops calling; the others must raise within ACTORCC_TIMEOUT_S + slack,
           before torch's own (longer) timeout
  ctypes   a client with vLLM's PyNccl bindings (the library opened by VLLM_NCCL_SO_PATH, no
           preload): GetUniqueId, InitRank, AllReduce, AllGather, ReduceScatter, Broadcast,
           grouped Send/Recv, an AllReduce captured in a CUDA graph and replayed
  cupy     cupy.cuda.nccl.NcclCommunicator (ray.util.collective's NCCL backend) with the library
           preloaded: allReduce, allGather, bcast, reduceScatter, grouped send/recv
  nccl4py  nccl4py 0.6.0 (built against NCCL 2.32.3): config=, .properties, the per-call-config
           collectives, the parameter table, suspend/resume (nccl_today_clients.py)
  jax      JAX's CUDA plugin: a two-process psum and process_allgather (nccl_today_clients.py)
Every process first checks that the NCCL it runs is actorcc's: the one libnccl mapped in
/proc/self/maps is $ACTORCC_NCCL_ABI_LIB and torch.cuda.nccl.version() is that library's.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import os
import signal
import socket
import subprocess
import sys
import time
import traceback

SEED = 20261203
# NCCLABI_BACKEND=gloo runs the torch cases on the CPU with gloo: CI's check of this harness's own
# references (torch refusals of what gloo lacks are printed as REFUSED there).
BACKEND = os.environ.get("NCCLABI_BACKEND", "nccl")
GLOO = BACKEND == "gloo"


def _dev():
    import torch
    return torch.device("cpu") if GLOO else torch.device("cuda", 0)


def _sync():
    import torch
    if not GLOO:
        torch.cuda.synchronize()


# ---------------------------------------------------------------- launcher
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(case, world, timeout, logdir, stagger=0.3, mode="preload", extra_env=None):
    """Starts `world` ranks of `case`, the library turned on by `mode` ("preload": LD_PRELOAD,
    "audit": LD_AUDIT with the module beside the library, "none": torch's own NCCL); returns
    (passed, summary text)."""
    lib = os.environ.get("ACTORCC_NCCL_ABI_LIB")
    if mode != "none" and not lib:
        return False, "ACTORCC_NCCL_ABI_LIB is not set (the library under test)"
    os.makedirs(logdir, exist_ok=True)
    port, port2 = _free_port(), _free_port()
    procs, logs = [], []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), CUDA_VISIBLE_DEVICES="0", ACTORCC_CUDA_SHARE_GPU="1",
                   NCCLABI_PORT2_R0=str(port2), PYTHONUNBUFFERED="1", **(extra_env or {}))
        if mode == "preload":
            env["LD_PRELOAD"] = lib
        elif mode == "audit":
            env["LD_AUDIT"] = os.path.join(os.path.dirname(lib), "libactorcc_nccl_audit.so")
        if case == "kill" or case == "stall":
            env.update(TORCH_NCCL_BLOCKING_WAIT="1", TORCH_NCCL_ASYNC_ERROR_HANDLING="0")
        if case == "stall":
            env.setdefault("ACTORCC_TIMEOUT_S", "8")
        if case == "ctypes":  # vLLM's way: the library by path, torch keeps the NCCL it ships
            env.pop("LD_PRELOAD", None)
            env["VLLM_NCCL_SO_PATH"] = lib
        log = open(os.path.join(logdir, f"{case}-{mode}-w{world}-rank{r}.log"), "w")
        logs.append(log)
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", case], env=env,
                                      stdout=log, stderr=subprocess.STDOUT))
        time.sleep(stagger)
    deadline = time.monotonic() + timeout
    culprit = world - 1 if case in ("kill", "killwd", "stall") else None
    t0 = time.monotonic()
    ends = {}
    while time.monotonic() < deadline and len(ends) < world:
        for r, p in enumerate(procs):
            if r not in ends and p.poll() is not None:
                ends[r] = time.monotonic() - t0
        # the stalled rank never finishes by itself: once the others are done it has served
        if culprit is not None and all(r in ends for r in range(world) if r != culprit):
            break
        time.sleep(0.1)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    for log in logs:
        log.close()
    texts = [open(os.path.join(logdir, f"{case}-{mode}-w{world}-rank{r}.log"), errors="replace").read()
             for r in range(world)]
    problems = []
    for r in range(world):
        if r == culprit:
            continue
        if r not in ends:
            problems.append(f"rank {r} did not finish within {timeout} s")
            continue
        if case == "killwd":
            # torch's watchdog ends the process (or Work.wait raises first); either way its
            # message must name the dead rank
            theirs = "\n".join(line for line in texts[r].splitlines()
                               if not line.startswith(("IDENTITY", "FAIL", "RESULT", "WORKER-OK", "WAITING")))
            if f"rank {culprit}" not in theirs:
                problems.append(f"rank {r}: exit {procs[r].returncode}, the dead rank {culprit} is not named")
        elif procs[r].returncode != 0 or f"WORKER-OK rank {r}" not in texts[r]:
            lines = [line for line in texts[r].splitlines() if line.strip()]
            # a signal (an abort in a library's thread) prints no FAIL line: its last words instead
            said = [line for line in lines if "FAIL" in line or "Error" in line] or lines[-6:]
            tail = " | ".join(said)[:900]
            problems.append(f"rank {r}: exit {procs[r].returncode} {tail}")
    checks = sum(int(line.split("checks=")[1].split()[0]) for t in texts for line in t.splitlines()
                 if "WORKER-OK" in line and "checks=" in line)
    detail = f"{checks} checks" if not problems else "; ".join(problems)
    return not problems, f"{detail}, {time.monotonic() - t0:.1f} s"


# ---------------------------------------------------------------- inside a rank
class Checker:
    def __init__(self, rank):
        self.rank, self.n, self.fails = rank, 0, []

    def eq(self, what, got, want, tol=0.0):
        import torch
        self.n += 1
        g, w = got.detach().double().cpu(), want.detach().double().cpu()
        if g.shape != w.shape:
            self.fails.append(f"{what}: shape {tuple(g.shape)} != {tuple(w.shape)}")
            return
        bad = (g - w).abs() > tol * w.abs().clamp(min=1.0)
        bad |= torch.isnan(g) != torch.isnan(w)
        if bad.any():
            i = int(bad.nonzero()[0][0]) if g.dim() else 0
            gi, wi = (g.reshape(-1)[i], w.reshape(-1)[i])
            self.fails.append(f"{what}: {int(bad.sum())} wrong of {g.numel()}, first at {i}: {float(gi)} != {float(wi)}")

    def same_bits(self, what, got, want):
        import torch
        self.n += 1
        if not torch.equal(got.detach().cpu().view(torch.uint8), want.detach().cpu().view(torch.uint8)):
            self.fails.append(f"{what}: bytes differ")

    def done(self, case):
        for f in self.fails[:20]:
            print(f"FAIL rank {self.rank} {case}: {f}", flush=True)
        if self.fails:
            print(f"RESULT rank {self.rank} {case}: {len(self.fails)} failures of {self.n} checks", flush=True)
            sys.exit(1)
        print(f"WORKER-OK rank {self.rank} case={case} checks={self.n}", flush=True)


def check_identity(ck):
    """The NCCL this process's calls reach is actorcc's: the global scope's ncclAllReduce (what
    torch's calls bind to, a preloaded library coming first) lies in the library under test. With
    LD_PRELOAD, torch may still map NVIDIA's copy by its path beside it (torch's loader preloads
    the nvidia wheels' libraries), unused; with LD_AUDIT that load is redirected too, so there the
    library under test must be the only libnccl mapped."""
    import torch
    mapped = sorted({line.split(None, 5)[5].strip() for line in open("/proc/self/maps")
                     if len(line.split(None, 5)) == 6 and "libnccl" in os.path.basename(line.split(None, 5)[5])})
    v = torch.cuda.nccl.version()
    bound = _global_symbol_file("ncclAllReduce")
    print(f"IDENTITY rank {ck.rank}: torch.cuda.nccl.version()={v} ncclAllReduce from {bound} mapped={mapped}",
          flush=True)
    if not os.environ.get("LD_PRELOAD") and not os.environ.get("LD_AUDIT"):
        return  # a control run on the NCCL torch ships
    want = os.path.realpath(os.environ["ACTORCC_NCCL_ABI_LIB"])
    ck.n += 1
    if os.environ.get("LD_AUDIT"):
        # torch's own dlopen brings the library in, so it is not in the global scope (bound is
        # None); the audit module redirected every libnccl load to it: the only one mapped.
        if [os.path.realpath(m) for m in mapped] != [want]:
            ck.fails.append(f"libnccl mapped under LD_AUDIT: {mapped}, expected only {want}")
    elif bound is None or os.path.realpath(bound) != want:
        ck.fails.append(f"ncclAllReduce resolves to {bound}, not {want}")


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _global_symbol_file(name):
    """The file that defines `name` in this process's global scope (dlsym(RTLD_DEFAULT)), or None."""
    libc = ctypes.CDLL(None)
    libc.dlsym.restype = ctypes.c_void_p
    libc.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    addr = libc.dlsym(None, name.encode())  # RTLD_DEFAULT is the null handle on glibc
    if not addr:
        return None
    info = _DlInfo()
    if not libc.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) or not info.dli_fname:
        return None
    return info.dli_fname.decode()


def inputs(dtype, n, rank, salt, world):
    """Every rank's input for one call (list by rank), as float64 values exact in `dtype`."""
    import torch
    out = []
    for r in range(world):
        g = torch.Generator().manual_seed(SEED + 1000003 * salt + 7919 * r)
        if dtype == torch.bool:
            out.append(torch.randint(0, 2, (n,), generator=g).bool())
        elif dtype == torch.uint8:
            out.append(torch.randint(0, 4, (n,), generator=g).to(dtype))
        else:
            v = torch.randint(-3, 4, (n,), generator=g)
            v[v == 0] = 1  # no zeros: PROD stays informative
            out.append(v.to(dtype))
    return out


def _ref(op, xs, world, dtype):
    import torch
    d = torch.stack([x.double() for x in xs])
    if op == "sum":
        return d.sum(0)
    if op == "prod":
        return d.prod(0)
    if op == "min":
        return d.min(0).values
    if op == "max":
        return d.max(0).values
    if op == "avg":
        s = d.sum(0) / world
        return s.trunc() if not dtype.is_floating_point else s
    if op == "premul":
        return (2.0 * d).sum(0)
    raise ValueError(op)


def matrix(rank, world, ck):
    import torch
    import torch.distributed as dist
    dev = _dev()
    R = dist.ReduceOp
    ops = {"sum": R.SUM, "prod": R.PRODUCT, "min": R.MIN, "max": R.MAX, "avg": R.AVG}
    floats = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
    ints = [torch.int8, torch.uint8, torch.int32, torch.int64]
    fp8 = [d for d in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)) if d is not None]
    sizes = [1, 7, 1031, 65539]
    salt = 0
    for dtype in floats + ints + fp8:
        for n in sizes:
            # PREMUL_SUM on bfloat16 is left out: torch hands NCCL a float32 scalar for it, and
            # NCCL (2.28, enqueue.cc) copies the datatype's 2 bytes of that pointer, so under
            # NVIDIA's library too the factor is the float's low half (0 for 2.0). actorcc reads
            # it the same way (docs/nccl-types.md); the mathematical result is no reference.
            xs_op = list(ops.items()) + ([("premul", None)] if dtype in floats and dtype != torch.bfloat16 and
                                         hasattr(dist, "_make_nccl_premul_sum") else [])
            for name, op in xs_op:
                salt += 1
                xs = inputs(torch.float32 if dtype in fp8 else dtype, n, rank, salt, world)
                t = xs[rank].to(dtype).to(dev, copy=True)
                try:
                    dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0) if name == "premul" else op)
                except (RuntimeError, ValueError, TypeError) as e:
                    if torch_refusal(e) or GLOO:
                        # torch refuses float8 reductions before NCCL is called (gloo: what it lacks)
                        print(f"REFUSED rank {rank} all_reduce {dtype} {name}: {str(e).splitlines()[0][:120]}", flush=True)
                        continue
                    ck.fails.append(f"all_reduce {dtype} {name} n={n}: {type(e).__name__}: {str(e)[:200]}")
                    continue
                if os.environ.get("NCCLABI_CORRUPT") and rank == 0 and dtype == torch.float32 and n == 7:
                    t[3] += 1  # the harness's own test: one wrong element must fail the case
                want = _ref(name, [x.to(dtype).double() for x in xs], world, dtype)
                tol = 0.0 if name != "avg" or world in (1, 2, 4) else (2e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6)
                ck.eq(f"all_reduce {dtype} {name} n={n}", t.double() if dtype not in fp8 else t.float(), want.to(dtype).double(), tol)
    # bool: torch turns SUM into MAX on uint8 (logical or)
    xs = inputs(torch.bool, 1031, rank, 99, world)
    t = xs[rank].to(dev, copy=True)
    dist.all_reduce(t)
    ck.eq("all_reduce bool", t, torch.stack(xs).any(0))
    for dtype in floats + ints + fp8 + [torch.bool]:
        for n in (1, 7, 4099):
            salt += 1
            xs = inputs(torch.float32 if dtype in fp8 else dtype, n, rank, salt, world)
            xs = [x.to(dtype) for x in xs]
            mine = xs[rank].to(dev, copy=True)
            moves(ck, rank, world, dtype, n, xs, mine, dev)
            if dtype in fp8 or dtype == torch.bool:
                continue
            # reduce_scatter_tensor (sum, avg for floats, max), reduce to rank 1 % world (sum, min)
            for name in ("sum", "max") + (("avg",) if dtype in floats else ()):
                salt += 1
                xs2 = inputs(dtype, world * n, rank, salt, world)
                o = torch.empty(n, dtype=dtype, device=dev)
                dist.reduce_scatter_tensor(o, xs2[rank].to(dev, copy=True), op=ops[name])
                want = _ref(name, xs2, world, dtype)[rank * n:(rank + 1) * n]
                tol = 0.0 if name != "avg" or world in (2, 4) else (2e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6)
                ck.eq(f"reduce_scatter {dtype} {name} n={n}", o, want.to(dtype), tol)
            for name in ("sum", "min"):
                t = mine.clone()
                root = 1 % world
                dist.reduce(t, dst=root, op=ops[name])
                if rank == root:  # other ranks' buffers are unspecified after a reduce
                    ck.eq(f"reduce {dtype} {name} n={n}", t, _ref(name, xs, world, dtype).to(dtype))
    # uneven all_to_all_single: rank r sends j+1 elements to rank j
    ins = [[torch.full((j + 1,), 100 * r + j, dtype=torch.float32) for j in range(world)] for r in range(world)]
    o = torch.empty(sum(rank + 1 for _ in range(world)), device=dev)
    dist.all_to_all_single(o, torch.cat(ins[rank]).to(dev, copy=True), output_split_sizes=[rank + 1] * world,
                           input_split_sizes=[j + 1 for j in range(world)])
    ck.eq("all_to_all uneven", o, torch.cat([ins[r][rank] for r in range(world)]))
    dist.barrier()


def torch_refusal(e):
    """Whether torch refused the call before the library saw it (float8 reductions, a dtype or op
    its NCCL backend does not map): an error from NCCL's API is a DistBackendError saying
    "NCCL error"."""
    return "nccl error" not in str(e).lower() and type(e).__name__ != "DistBackendError"


def moves(ck, rank, world, dtype, n, xs, mine, dev):
    """The collectives that only move data, each checked bit for bit; a call torch itself
    refuses for this dtype (before NCCL sees it) is printed as REFUSED, not failed."""
    import torch
    import torch.distributed as dist

    def attempt(what, fn):
        try:
            fn()
            return True
        except (RuntimeError, ValueError, TypeError) as e:
            if torch_refusal(e) or GLOO:
                print(f"REFUSED rank {rank} {what}: {str(e).splitlines()[0][:160]}", flush=True)
            else:
                ck.fails.append(f"{what}: {type(e).__name__}: {str(e)[:200]}")
            return False

    what = f"{dtype} n={n}"
    out = torch.empty(world * n, dtype=dtype, device=dev)
    if attempt(f"all_gather {what}", lambda: dist.all_gather_into_tensor(out, mine)):
        ck.same_bits(f"all_gather {what}", out, torch.cat(xs))
    b = mine.clone()  # broadcast from the last rank
    if attempt(f"broadcast {what}", lambda: dist.broadcast(b, src=world - 1)):
        ck.same_bits(f"broadcast {what}", b, xs[world - 1])
    big = [torch.cat([x] * world) for x in xs]  # all_to_all: chunk j of rank r goes to rank j
    o = torch.empty(world * n, dtype=dtype, device=dev)
    if attempt(f"all_to_all {what}", lambda: dist.all_to_all_single(o, big[rank].to(dev, copy=True))):
        ck.same_bits(f"all_to_all {what}", o, torch.cat([big[j][rank * n:(rank + 1) * n] for j in range(world)]))
    gl = [torch.empty(n, dtype=dtype, device=dev) for _ in range(world)] if rank == 0 else None
    if attempt(f"gather {what}", lambda: dist.gather(mine, gl, dst=0)) and rank == 0:
        ck.same_bits(f"gather {what}", torch.cat(gl), torch.cat(xs))
    s = torch.empty(n, dtype=dtype, device=dev)
    sl = [x.to(dev, copy=True) for x in xs] if rank == world - 1 else None
    if attempt(f"scatter {what}", lambda: dist.scatter(s, sl, src=world - 1)):
        ck.same_bits(f"scatter {what}", s, xs[rank])


def train(rank, world, ck):
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    dev = _dev()

    def model():
        torch.manual_seed(SEED)
        return nn.Sequential(nn.Linear(33, 65), nn.ReLU(), nn.Linear(65, 7)).to(dev)

    def batch(r, step):
        g = torch.Generator().manual_seed(SEED + 31 * r + step)
        return torch.randn(5, 33, generator=g).to(dev, copy=True), torch.randn(5, 7, generator=g).to(dev, copy=True)

    def reference(steps):
        m = model()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for step in range(steps):
            grads = None
            for r in range(world):
                m.zero_grad()
                x, y = batch(r, step)
                nn.functional.mse_loss(m(x), y).backward()
                g = [p.grad.double().clone() for p in m.parameters()]
                grads = g if grads is None else [a + b for a, b in zip(grads, g)]
            for p, g in zip(m.parameters(), grads):
                p.grad = (g / world).float()
            opt.step()
        return [p.detach().clone() for p in m.parameters()]

    def fit(wrapped, steps):
        """`steps` SGD steps of this rank's batches on the wrapped (DDP / FSDP2) model."""
        opt = torch.optim.SGD(wrapped.parameters(), lr=0.1)
        for step in range(steps):
            opt.zero_grad()
            x, y = batch(rank, step)
            nn.functional.mse_loss(wrapped(x), y).backward()
            opt.step()

    steps = 3
    ref = reference(steps)
    ddp = DDP(model(), device_ids=None if GLOO else [0])
    fit(ddp, steps)
    for i, (p, q) in enumerate(zip(ddp.module.parameters(), ref)):
        ck.eq(f"DDP param {i}", p, q, 1e-4)
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh(dev.type, (world,))
    m = model()
    for layer in m:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    fit(m, steps)
    for i, (p, q) in enumerate(zip(m.parameters(), ref)):
        ck.eq(f"FSDP2 param {i}", p.full_tensor(), q, 1e-4)
    dist.barrier()


def groups(rank, world, ck, bound):
    import torch
    import torch.distributed as dist
    dev = _dev()
    mode = "split" if bound else "fresh"
    subsets = [[0, world - 1], list(range(1, world)) if world > 2 else [1], list(range(world))]
    for k, members in enumerate(subsets):
        g = dist.new_group(members)  # every rank calls it; non-members get NOCOLOR in a split
        if rank not in members:
            continue
        xs = inputs(torch.float32, 4099, rank, 500 + k, world)
        t = xs[rank].to(dev, copy=True)
        dist.all_reduce(t, group=g)
        ck.eq(f"{mode} group {members} all_reduce", t, sum(xs[m] for m in members))
        b = xs[rank].to(dev, copy=True)
        dist.broadcast(b, src=members[-1], group=g)
        ck.eq(f"{mode} group {members} broadcast", b, xs[members[-1]])
    # batch_isend_irecv: a ring both ways in one batch
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    send_a, send_b = (torch.full((1031,), float(rank), device=dev), torch.full((7,), float(-rank), device=dev))
    recv_a, recv_b = torch.empty(1031, device=dev), torch.empty(7, device=dev)
    ops = [dist.P2POp(dist.isend, send_a, nxt), dist.P2POp(dist.irecv, recv_a, prv),
           dist.P2POp(dist.isend, send_b, prv), dist.P2POp(dist.irecv, recv_b, nxt)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    ck.eq("batch ring forward", recv_a, torch.full((1031,), float(prv)))
    ck.eq("batch ring backward", recv_b, torch.full((7,), float(-nxt)))
    # lone send/recv between ranks 0 and 1 (torch makes a 2-rank communicator for the pair)
    if rank in (0, 1):
        peer = 1 - rank
        mine, got = torch.full((65539,), float(rank + 10), device=dev), torch.empty(65539, device=dev)
        if rank == 0:
            dist.send(mine, peer)
            dist.recv(got, peer)
        else:
            dist.recv(got, peer)
            dist.send(mine, peer)
        ck.eq("lone send/recv", got, torch.full((65539,), float(peer + 10)))
    dist.barrier()
    # destroy, then a new default group on another port
    dist.destroy_process_group()
    kw = {"device_id": dev} if bound and not GLOO else {}
    dist.init_process_group(BACKEND, init_method=f"tcp://127.0.0.1:{os.environ['NCCLABI_PORT2_R0']}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60), **kw)
    xs = inputs(torch.float32, 1031, rank, 777, world)
    t = xs[rank].to(dev, copy=True)
    dist.all_reduce(t)
    ck.eq("after destroy + init all_reduce", t, sum(xs))


def failure(rank, world, ck, case):
    """kill / killwd / stall: the last rank is the culprit."""
    import torch
    import torch.distributed as dist
    dev = _dev()
    culprit = world - 1
    t = torch.ones(1 << 16, device=dev)
    dist.all_reduce(t)
    _sync()
    ck.eq("warm-up all_reduce", t, torch.full((1 << 16,), float(world)))
    dist.barrier()
    _sync()
    if rank == culprit:
        if case == "stall":
            time.sleep(120)  # never calls again; the launcher ends it
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    t0 = time.monotonic()
    try:
        w = dist.all_reduce(t, async_op=True)
        w.wait()
        _sync()
        if case == "killwd":
            # torch's default error handling: the watchdog, polling ncclCommGetAsyncError, ends
            # this process with its message; the launcher reads the message from the log
            print(f"WAITING rank {rank}: the all_reduce returned; waiting for torch's watchdog", flush=True)
            time.sleep(25)
            ck.fails.append("the watchdog did not end the process within 25 s")
        else:
            ck.fails.append(f"all_reduce with the last rank {'killed' if case != 'stall' else 'stalled'} returned")
    except Exception as e:  # noqa: BLE001 - the error is what is checked
        dt = time.monotonic() - t0
        msg = str(e)
        print(f"RAISED rank {rank} after {dt:.1f} s: {type(e).__name__}: {msg[:1500]}", flush=True)
        ck.n += 1
        if f"rank {culprit}" not in msg:
            ck.fails.append(f"the error does not name rank {culprit}")
        bound = 25.0 if case != "stall" else float(os.environ.get("ACTORCC_TIMEOUT_S", "8")) + 12.0
        if dt > bound:
            ck.fails.append(f"raised after {dt:.1f} s (bound {bound:.0f} s)")
    ck.done(case)
    os._exit(1 if ck.fails else 0)  # the communicator is broken: no clean teardown


# ---------------------------------------------------------------- NCCL's C API from other clients
# vLLM's PyNccl binding shape (vllm/distributed/device_communicators/pynccl_wrapper.py): ctypes,
# ncclUniqueId passed by value, every call on an explicit stream, captured in CUDA graphs.
def vllm_style_bindings(path):
    import ctypes as C

    class UniqueId(C.Structure):
        _fields_ = [("internal", C.c_byte * 128)]

    lib = C.CDLL(path)
    P, I, S = C.c_void_p, C.c_int, C.c_size_t
    sig = {"ncclGetErrorString": (C.c_char_p, [I]), "ncclGetVersion": (I, [C.POINTER(I)]),
           "ncclGetUniqueId": (I, [C.POINTER(UniqueId)]),
           "ncclCommInitRank": (I, [C.POINTER(P), I, UniqueId, I]),
           "ncclAllReduce": (I, [P, P, S, I, I, P, P]), "ncclAllGather": (I, [P, P, S, I, P, P]),
           "ncclReduceScatter": (I, [P, P, S, I, I, P, P]), "ncclBroadcast": (I, [P, P, S, I, I, P, P]),
           "ncclReduce": (I, [P, P, S, I, I, I, P, P]),
           "ncclSend": (I, [P, S, I, I, P, P]), "ncclRecv": (I, [P, S, I, I, P, P]),
           "ncclGroupStart": (I, []), "ncclGroupEnd": (I, []), "ncclCommDestroy": (I, [P])}
    fns = {}
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
        fns[name] = f

    def call(name, *args):
        rc = fns[name](*args)
        if rc != 0:
            raise RuntimeError(f"{name}: {fns['ncclGetErrorString'](rc).decode()} ({rc})")
    return fns, call, UniqueId


def _store(rank, world):
    import torch.distributed as dist
    return dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), world, rank == 0,
                         timeout=datetime.timedelta(seconds=60))


def ctypes_client(rank, world, ck):
    import ctypes as C

    import torch
    fns, call, UniqueId = vllm_style_bindings(os.environ["VLLM_NCCL_SO_PATH"])
    v = C.c_int()
    call("ncclGetVersion", C.byref(v))
    ck.n += 1
    if not (10000 <= v.value < 100000):
        ck.fails.append(f"ncclGetVersion: {v.value} is not a 5-digit code (vLLM parses it so)")
    store = _store(rank, world)
    uid = UniqueId()
    if rank == 0:
        call("ncclGetUniqueId", C.byref(uid))
        store.set("uid", bytes(uid.internal))
    else:
        C.memmove(C.addressof(uid), store.get("uid"), 128)
    comm = C.c_void_p()
    call("ncclCommInitRank", C.byref(comm), world, uid, rank)
    dev = torch.device("cuda", 0)
    stream = torch.cuda.Stream()
    sp = C.c_void_p(stream.cuda_stream)
    F32, BF16, I32, SUM, MAX = 7, 9, 2, 0, 2
    n = 4099
    with torch.cuda.stream(stream):
        for dtype, code in ((torch.float32, F32), (torch.bfloat16, BF16), (torch.int32, I32)):
            xs = inputs(dtype, n, rank, 900 + code, world)
            x, y = xs[rank].to(dev), torch.empty(n, dtype=dtype, device=dev)
            for opname, op in (("sum", SUM), ("max", MAX)):
                call("ncclAllReduce", C.c_void_p(x.data_ptr()), C.c_void_p(y.data_ptr()), n, code, op, comm, sp)
                stream.synchronize()
                ck.eq(f"ctypes AllReduce {dtype} {opname}", y, _ref(opname, xs, world, dtype).to(dtype))
            g = torch.empty(world * n, dtype=dtype, device=dev)
            call("ncclAllGather", C.c_void_p(x.data_ptr()), C.c_void_p(g.data_ptr()), n, code, comm, sp)
            stream.synchronize()
            ck.eq(f"ctypes AllGather {dtype}", g, torch.cat(xs))
            big = inputs(dtype, world * n, rank, 950 + code, world)
            o, src = torch.empty(n, dtype=dtype, device=dev), big[rank].to(dev)
            call("ncclReduceScatter", C.c_void_p(src.data_ptr()), C.c_void_p(o.data_ptr()), n, code, SUM, comm, sp)
            stream.synchronize()
            ck.eq(f"ctypes ReduceScatter {dtype}", o, _ref("sum", big, world, dtype)[rank * n:(rank + 1) * n].to(dtype))
            b = torch.empty(n, dtype=dtype, device=dev)
            call("ncclBroadcast", C.c_void_p(x.data_ptr()), C.c_void_p(b.data_ptr()), n, code, world - 1, comm, sp)
            stream.synchronize()
            ck.eq(f"ctypes Broadcast {dtype}", b, xs[world - 1])
        # Send/Recv in a group: a ring
        s, r = torch.full((n,), float(rank), device=dev), torch.empty(n, device=dev)
        call("ncclGroupStart")
        call("ncclSend", C.c_void_p(s.data_ptr()), n, F32, (rank + 1) % world, comm, sp)
        call("ncclRecv", C.c_void_p(r.data_ptr()), n, F32, (rank - 1) % world, comm, sp)
        call("ncclGroupEnd")
        stream.synchronize()
        ck.eq("ctypes grouped Send/Recv ring", r, torch.full((n,), float((rank - 1) % world)))
    # captured in a CUDA graph, replayed with new inputs (vLLM's decode path)
    x, y = torch.empty(n, device=dev), torch.empty(n, device=dev)
    x.fill_(1.0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        call("ncclAllReduce", C.c_void_p(x.data_ptr()), C.c_void_p(y.data_ptr()), n, F32, SUM, comm, sp)  # warm-up
        stream.synchronize()
    with torch.cuda.graph(graph, stream=stream):
        call("ncclAllReduce", C.c_void_p(x.data_ptr()), C.c_void_p(y.data_ptr()),
             n, F32, SUM, comm, C.c_void_p(torch.cuda.current_stream().cuda_stream))
    for k in range(3):
        xs = inputs(torch.float32, n, rank, 990 + k, world)
        x.copy_(xs[rank])
        graph.replay()
        torch.cuda.synchronize()
        ck.eq(f"ctypes AllReduce in a CUDA graph, replay {k}", y, sum(xs))
    store.set(f"done{rank}", "1")
    store.wait([f"done{r}" for r in range(world)])
    call("ncclCommDestroy", comm)


def cupy_client(rank, world, ck):
    import cupy
    from cupy.cuda import nccl
    store = _store(rank, world)
    if rank == 0:
        store.set("uid", bytes(bytearray(b % 256 for b in nccl.get_unique_id())))
    raw = store.get("uid")
    try:  # CuPy 13+ takes the id as bytes, older CuPy as a tuple of signed chars
        comm = nccl.NcclCommunicator(world, raw, rank)
    except TypeError:
        comm = nccl.NcclCommunicator(world, tuple(b if b < 128 else b - 256 for b in raw), rank)
    ck.n += 1
    if comm.device_id() != 0 or comm.rank_id() != rank or comm.size() != world:
        ck.fails.append(f"cupy comm: device {comm.device_id()} rank {comm.rank_id()} size {comm.size()}")
    # a blocking stream: it waits for the legacy default stream, where cupy fills the buffers
    stream = cupy.cuda.Stream()
    n = 4099
    import torch
    for cdt, ncdt, tdt in ((cupy.float32, nccl.NCCL_FLOAT32, torch.float32), (cupy.float16, nccl.NCCL_FLOAT16, torch.float16),
                           (cupy.int64, nccl.NCCL_INT64, torch.int64)):
        xs = inputs(tdt, n, rank, 700 + ncdt, world)
        x = cupy.asarray(xs[rank].numpy())
        y = cupy.empty_like(x)
        comm.allReduce(x.data.ptr, y.data.ptr, n, ncdt, nccl.NCCL_SUM, stream.ptr)
        stream.synchronize()
        ck.eq(f"cupy allReduce {cdt.__name__}", torch.from_numpy(cupy.asnumpy(y)), sum(x.double() for x in xs).to(tdt))
        g = cupy.empty(world * n, dtype=cdt)
        comm.allGather(x.data.ptr, g.data.ptr, n, ncdt, stream.ptr)
        stream.synchronize()
        ck.eq(f"cupy allGather {cdt.__name__}", torch.from_numpy(cupy.asnumpy(g)), torch.cat(xs))
        b = x.copy()
        comm.bcast(b.data.ptr, n, ncdt, world - 1, stream.ptr)
        stream.synchronize()
        ck.eq(f"cupy bcast {cdt.__name__}", torch.from_numpy(cupy.asnumpy(b)), xs[world - 1])
        o = cupy.empty(n, dtype=cdt)
        big = cupy.asarray(torch.cat([xs[rank]] * world).numpy())
        comm.reduceScatter(big.data.ptr, o.data.ptr, n, ncdt, nccl.NCCL_MAX, stream.ptr)
        stream.synchronize()
        ck.eq(f"cupy reduceScatter max {cdt.__name__}", torch.from_numpy(cupy.asnumpy(o)),
              torch.stack([x.double() for x in xs]).max(0).values.to(tdt))
    s, r = cupy.full(n, rank, dtype=cupy.float32), cupy.empty(n, dtype=cupy.float32)
    nccl.groupStart()
    comm.send(s.data.ptr, n, nccl.NCCL_FLOAT32, (rank + 1) % world, stream.ptr)
    comm.recv(r.data.ptr, n, nccl.NCCL_FLOAT32, (rank - 1) % world, stream.ptr)
    nccl.groupEnd()
    stream.synchronize()
    ck.eq("cupy grouped send/recv ring", torch.from_numpy(cupy.asnumpy(r)), torch.full((n,), float((rank - 1) % world)))
    store.set(f"done{rank}", "1")
    store.wait([f"done{r}" for r in range(world)])
    comm.destroy()


def worker(case):
    import torch
    import torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ck = Checker(rank)
    if not GLOO:
        torch.cuda.set_device(0)
    if case in ("ctypes", "cupy"):
        try:
            (ctypes_client if case == "ctypes" else cupy_client)(rank, world, ck)
            if case == "cupy":
                check_identity(ck)
        except Exception:  # noqa: BLE001
            ck.fails.append(traceback.format_exc()[-1500:])
        return ck.done(case)
    if case in ("nccl4py", "jax"):
        import nccl_today_clients as today
        try:
            (today.nccl4py_client if case == "nccl4py" else today.jax_client)(rank, world, ck, inputs,
                                                                              _store(rank, world))
        except Exception:  # noqa: BLE001
            ck.fails.append(traceback.format_exc()[-1500:])
        return ck.done(case)
    bound = case == "groups"
    timeout = datetime.timedelta(seconds=30 if case in ("kill", "killwd", "stall") else 120)
    dist.init_process_group(BACKEND, rank=rank, world_size=world, timeout=timeout,
                            **({"device_id": _dev()} if bound and not GLOO else {}))
    try:
        t = torch.ones(4, device=_dev())
        dist.all_reduce(t)  # lazy init happens here: after it the library is surely mapped
        if not GLOO:
            check_identity(ck)
        if case == "matrix":
            matrix(rank, world, ck)
        elif case == "train":
            train(rank, world, ck)
        elif case in ("groups", "fresh"):
            groups(rank, world, ck, bound)
        elif case in ("kill", "killwd", "stall"):
            failure(rank, world, ck, case)
        else:
            raise SystemExit(f"unknown case {case}")
    except Exception:  # noqa: BLE001
        ck.fails.append(traceback.format_exc()[-1500:])
    _sync()
    if dist.is_initialized():
        dist.destroy_process_group()
    ck.done(case)
    if GLOO:
        # The harness's own check over gloo tests the cases, not the teardown of torch's gloo
        # threads at interpreter exit (not the library under test): the verdict is printed.
        sys.stdout.flush()
        os._exit(0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="matrix")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--timeout", type=float, default=240)
    p.add_argument("--logdir", default=os.environ.get("OUT", "/tmp") + "/nccl-abi-logs")
    p.add_argument("--mode", choices=("preload", "audit", "none"), default="preload",
                   help="how the library is turned on (none: the NCCL torch ships, or gloo)")
    p.add_argument("--no-preload", dest="mode", action="store_const", const="none", help="the same as --mode none")
    p.add_argument("--worker", metavar="CASE", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        return worker(a.worker)
    ok, text = launch(a.case, a.world, a.timeout, a.logdir, mode=a.mode)
    tag = "" if a.mode == "preload" else f" mode={a.mode}"
    print(f"NCCLABI {a.case} world={a.world}{tag}: {'PASS' if ok else 'FAIL'} ({text})", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
