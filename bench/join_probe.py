#!/usr/bin/env python3
"""Where a group's join time goes, through actorcc's libnccl.so.2: W rank processes call
ncclCommInitRank together (ctypes), several times over, each time with a fresh id whose root
(ncclGetUniqueId) lives in rank 0's process or in this launcher, made just before the joins
(as torch does inside its first collective) or a second earlier:

    python bench/join_probe.py --world 4 --root rank0-jit --trials 3 [--cuda] [--torch-pg]

--cuda: the ranks bring torch and CUDA up first and share GPU 0 (ACTORCC_CUDA_SHARE_GPU), else
they run on the CPU backend; --torch-pg: torch.distributed's process group is also up (its
store and watchdog threads), as under init_process_group. Prints one JSON line: per trial, each
rank's init and join (the ready line's part) in ms, and each rank's busiest threads over its
init: [ms waiting for a CPU, ms on a CPU, comm], a thread new since the init's start marked "*".
Trial 0 is each process's first join; later trials show what a warm process pays.

--sample MS: a sampler process reads every thread of ranks 0 and 1 from /proc over the first MS ms
of each trial's joins (state, system call, wait channel, and the kernel stack where the reader may
see it), and each trial lists the waits of the threads that joined (the main thread, and threads
new since the id was made: the root's, a rank's) and every uninterruptible wait: [ms from the
joins' start, ms, state, what]. A join that takes long while its threads run little waits
somewhere in the kernel; this names where (e.g. accept4 in synchronize_rcu, a descriptor table
growing; see src/common/fd_table.hpp).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import re
import select
import socket
import subprocess
import sys
import tempfile
import time


class NcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def read_text(path):
    """A /proc file's text, or None where it is gone (a thread or process that ended)."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def threads():
    """{tid: (comm, ns on a CPU, ns waiting for one)} of this process (Linux schedstat)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        sched, comm = read_text(f"/proc/self/task/{tid}/schedstat"), read_text(f"/proc/self/task/{tid}/comm")
        if sched is not None and comm is not None:  # else a thread that ended meanwhile
            run, wait = (int(x) for x in sched.split()[:2])
            out[tid] = (comm.strip(), run, wait)
    return out


def busiest(before, after, n=3):
    rows = []
    for tid, (comm, run, wait) in after.items():
        _, r0, w0 = before.get(tid, ("", 0, 0))
        rows.append([round((wait - w0) / 1e6, 2), round((run - r0) / 1e6, 2), comm + ("" if tid in before else "*")])
    rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
    return rows[:n]


# x86-64 system call numbers a joining thread is seen in (/proc/<tid>/syscall gives the number)
SYSCALLS = {0: "read", 1: "write", 3: "close", 7: "poll", 9: "mmap", 10: "mprotect", 11: "munmap", 16: "ioctl",
            35: "nanosleep", 41: "socket", 42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom", 202: "futex",
            230: "clock_nanosleep", 232: "epoll_wait", 257: "openat", 271: "ppoll", 281: "epoll_pwait",
            288: "accept4"} if platform.machine() == "x86_64" else {}


def sample_main(a):
    """The sampler (a process of its own, so the GIL of no sampled process is involved): reads
    each thread of --sample-pid until --sample ms have passed, and writes runs of equal samples
    per thread to --sample-out: {tid: [[t0, t1, state, what], ...]} with t in CLOCK_MONOTONIC ms."""
    base = f"/proc/{a.sample_pid}/task"
    stacks = read_text(f"/proc/{a.sample_pid}/stack") is not None  # needs privileges
    print("READY", flush=True)
    runs, names = {}, {}
    end = time.monotonic() + a.sample / 1e3
    while time.monotonic() < end:
        try:
            tids = os.listdir(base)
        except OSError:  # the process ended
            break
        for tid in tids:
            st = read_text(f"{base}/{tid}/stat")
            call = read_text(f"{base}/{tid}/syscall")
            if st is None or call is None:
                continue
            state = st[st.rfind(")") + 2]
            names.setdefault(tid, st[st.find("(") + 1:st.rfind(")")])
            f = call.split()
            # "running"; "-1 ..." blocked outside a system call (a page fault); else the call's number
            what = f[0] if f[0] == "running" else ("fault" if f[0] == "-1" else SYSCALLS.get(int(f[0]), "syscall " + f[0]))
            if state != "R":
                what += " in " + (read_text(f"{base}/{tid}/wchan") or "?")
                if stacks and state == "D":
                    frames = (read_text(f"{base}/{tid}/stack") or "").split()
                    what += " <- " + " <- ".join(x.split("+")[0] for x in frames if "+" in x)[:200]
            t = time.monotonic() * 1e3
            r = runs.setdefault(tid, [])
            if r and r[-1][2:] == [state, what]:
                r[-1][1] = t
            else:
                r.append([t, t, state, what])
    with open(a.sample_out, "w") as f:
        json.dump({"names": names, "runs": runs}, f)
    return 0


class Sampler:
    """Samples ranks 0 and 1 over one trial's joins (see sample_main)."""

    def __init__(self, a, pids, logdir, trial):
        self.pids = pids
        self.old = {pid: set(os.listdir(f"/proc/{pid}/task")) for pid in pids}  # before the id was made
        self.a, self.logdir, self.trial, self.procs = a, logdir, trial, []

    def start(self):
        for k, pid in enumerate(self.pids):
            out = os.path.join(self.logdir, f"sample-{self.trial}-{k}.json")
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--sample", str(self.a.sample),
                                  "--sample-pid", str(pid), "--sample-out", out], stdout=subprocess.PIPE, text=True)
            self.procs.append((p, out))
        for p, _ in self.procs:
            ready, _, _ = select.select([p.stdout], [], [], self.a.timeout)
            if not ready or p.stdout.readline().strip() != "READY":
                raise SystemExit(f"join_probe: a sampler did not start within {self.a.timeout:.0f} s")

    def waits(self, start):
        """Per sampled rank: [thread, ms from the joins' start, ms, state, what] of the joining
        threads' runs of at least 1 ms, and every uninterruptible wait."""
        out = []
        for (p, path), pid in zip(self.procs, self.pids):
            p.wait(timeout=30)
            with open(path) as f:
                d = json.load(f)
            rows = []
            for tid, runs in d["runs"].items():
                who = "main" if tid == str(pid) else f"{d['names'][tid]} {tid}" + ("*" if tid not in self.old[pid] else "")
                joining = who == "main" or who.endswith("*")
                for t0, t1, state, what in runs:
                    if (joining and t1 - t0 >= 1) or state == "D":
                        rows.append([who, round(t0 - start * 1e3, 2), round(t1 - t0, 2), state, what])
            out.append(sorted(rows, key=lambda r: r[1]))
        return out


def rank_main(a):
    if a.cuda:
        import torch
        torch.cuda.set_device(0)
        torch.ones(1 << 20, device="cuda").sum().item()  # context, allocator and a kernel up
    if a.torch_pg:
        import torch.distributed as dist
        dist.init_process_group("nccl" if a.cuda else "gloo", init_method=f"tcp://127.0.0.1:{a.port}",
                                rank=a.rank, world_size=a.world)
    lib = ctypes.CDLL(a.lib)
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(NcclUniqueId)]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, NcclUniqueId, ctypes.c_int]
    lib.ncclCommDestroy.argtypes = [ctypes.c_void_p]

    def make_id():
        uid = NcclUniqueId()
        rc = lib.ncclGetUniqueId(ctypes.byref(uid))
        if rc != 0:
            raise SystemExit(f"rank {a.rank}: ncclGetUniqueId returned {rc}")
        return bytes(uid).hex()

    early = make_id() if (a.root == "rank0-early" and a.rank == 0) else "-"
    print("READY " + early, flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "MKID":
            print("ID " + make_id(), flush=True)
        elif cmd[0] == "GO":
            uid = NcclUniqueId.from_buffer_copy(bytes.fromhex(cmd[1]))
            comm = ctypes.c_void_p()
            t0 = threads()
            start = time.monotonic()
            rc = lib.ncclCommInitRank(ctypes.byref(comm), a.world, uid, a.rank)
            ms = (time.monotonic() - start) * 1e3
            print("DONE " + json.dumps({"rc": rc, "init_ms": round(ms, 2), "threads": busiest(t0, threads())}),
                  flush=True)
            if rc == 0:
                lib.ncclCommDestroy(comm)
        elif cmd[0] == "QUIT":
            return 0
    return 0


class Ranks:
    """The rank processes, each answering one line per command; a rank that exits or does not
    answer within the timeout ends the probe, naming it."""

    def __init__(self, a, logdir):
        env = dict(os.environ, ACTORCC_LOG="info")
        if a.cuda:
            env.update(ACTORCC_CUDA_SHARE_GPU="1", CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", "0"))
        else:
            env["ACTORCC_BACKEND"] = "cpu"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.timeout = a.timeout
        self.logs = [open(os.path.join(logdir, f"rank{r}.log"), "w+") for r in range(a.world)]
        self.procs = [subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--lib", a.lib, "--world", str(a.world), "--root", a.root,
             "--rank", str(r), "--port", str(port)] + (["--cuda"] if a.cuda else []) +
            (["--torch-pg"] if a.torch_pg else []),
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.logs[r], text=True)
            for r in range(a.world)]

    def send(self, r, text):
        self.procs[r].stdin.write(text + "\n")
        self.procs[r].stdin.flush()

    def answer(self, r):
        p = self.procs[r]
        ready, _, _ = select.select([p.stdout], [], [], self.timeout)
        line = p.stdout.readline() if ready else ""
        if not line:
            self.close(kill=True)
            self.logs[r].seek(0)
            tail = self.logs[r].read()[-2000:]
            raise SystemExit(f"join_probe: rank {r} exited or did not answer within {self.timeout:.0f} s:\n{tail}")
        return line.split(None, 1)

    def close(self, kill=False):
        for p in self.procs:
            if kill:
                p.kill()
            else:
                try:
                    p.stdin.write("QUIT\n")
                    p.stdin.flush()
                except OSError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()

    def joins(self):
        """Each rank's join times (ms) from its ready lines, in order."""
        out = []
        for f in self.logs:
            f.seek(0)
            out.append([float(m) for m in re.findall(r" ready: .*, join ([0-9.]+),", f.read())])
        return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lib", help="the libnccl.so.2 to probe (default: actorcc's, actorcc.nccl.library_path())")
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--root", default="rank0-jit", choices=["rank0-jit", "rank0-early", "launcher-jit", "launcher-early"])
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--cuda", action="store_true", help="ranks on GPU 0 with torch and CUDA up")
    p.add_argument("--torch-pg", action="store_true", help="torch.distributed's process group up in each rank")
    p.add_argument("--timeout", type=float, default=60, help="seconds a rank may take to answer")
    p.add_argument("--json", help="also write the result here")
    p.add_argument("--sample", type=float, default=0, metavar="MS",
                   help="sample ranks 0 and 1's threads over the first MS ms of each trial's joins")
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--sample-pid", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--sample-out", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.sample_pid:
        return sample_main(a)
    if a.lib is None:
        import actorcc.nccl
        a.lib = actorcc.nccl.library_path()
    if a.rank >= 0:
        return rank_main(a)

    launcher_lib = None
    if a.root.startswith("launcher"):
        launcher_lib = ctypes.CDLL(a.lib)
        launcher_lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(NcclUniqueId)]

    def launcher_id():
        uid = NcclUniqueId()
        if launcher_lib.ncclGetUniqueId(ctypes.byref(uid)) != 0:
            raise SystemExit("join_probe: ncclGetUniqueId failed in the launcher")
        return bytes(uid).hex()

    def rank0_id():
        ranks.send(0, "MKID")
        return ranks.answer(0)[1].strip()

    make_id = rank0_id if a.root.startswith("rank0") else launcher_id
    with tempfile.TemporaryDirectory(prefix="join_probe-") as logdir:
        ranks = Ranks(a, logdir)
        early = [ranks.answer(r)[1].strip() for r in range(a.world)][0]  # every READY; rank 0's id
        trials = []
        for t in range(a.trials):
            time.sleep(0.5)  # the ranks idle between trials, as between a job's groups
            sampler = Sampler(a, [p.pid for p in ranks.procs[:2]], logdir, t) if a.sample else None
            # rank0-early's first id is the one rank 0 made at its start
            uid = early if (a.root == "rank0-early" and t == 0) else make_id()
            if a.root.endswith("-early"):
                time.sleep(1.0)  # the id, and its root, a second older than the joins
            if sampler:
                sampler.start()
            start = time.monotonic()
            for r in range(a.world):
                ranks.send(r, "GO " + uid)
            done = [json.loads(ranks.answer(r)[1]) for r in range(a.world)]
            wall = (time.monotonic() - start) * 1e3
            bad = [f"rank {r}: rc {d['rc']}" for r, d in enumerate(done) if d["rc"] != 0]
            if bad:
                ranks.close(kill=True)
                raise SystemExit("join_probe: ncclCommInitRank failed: " + "; ".join(bad))
            trials.append({"trial": t, "all_done_ms": round(wall, 2), "init_ms": [d["init_ms"] for d in done],
                           "threads": [d["threads"] for d in done]})
            if sampler:
                trials[-1]["waits"] = sampler.waits(start)
        ranks.close()
        joins = ranks.joins()
    for t in trials:
        t["join_ms"] = [j[t["trial"]] if t["trial"] < len(j) else None for j in joins]
    out = {"root": a.root, "world": a.world, "cuda": a.cuda, "torch_pg": a.torch_pg, "trials": trials}
    print(json.dumps(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
