"""actorcc.torch.shrink_group (torch's own shrink_group cannot reach the Python "actorcc" backend:
docs/torch.md): 3 processes on the CPU backend, rank 2 SIGKILLed after a first all_reduce, the
survivors' call fails naming it, they shrink and get an exact all_reduce in the new group; and
torch's shrink_group refuses the backend as documented."""
import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

WORKER = r"""
import datetime, os, signal, sys, torch, torch.distributed as dist
import actorcc.torch as at
rank, port = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("actorcc", init_method="tcp://127.0.0.1:" + port, rank=rank, world_size=3,
                        timeout=datetime.timedelta(seconds=20))
pg = dist.group.WORLD
x = torch.full((1000,), float(rank + 1), dtype=torch.float64)
dist.all_reduce(x)
assert torch.equal(x, torch.full((1000,), 6.0, dtype=torch.float64)), x[:3]
if rank == 2:
    os.kill(os.getpid(), signal.SIGKILL)
if rank == 1 and hasattr(dist, "shrink_group"):
    try:
        dist.shrink_group([2])
        print("TORCH-SHRINK accepted")
    except TypeError as e:
        print("TORCH-SHRINK refused:", e)
try:
    dist.all_reduce(x)
    print("NO-ERROR")
except Exception as e:
    print("ERROR:", e)
new = at.shrink_group(pg, [2])
y = torch.rand(777, dtype=torch.float64) if rank == 0 else torch.zeros(777, dtype=torch.float64)
ref = y.clone()
new.broadcast([y], dist.BroadcastOptions()).wait()
z = torch.arange(513, dtype=torch.float64) * (rank + 1)
new.allreduce([z]).wait()
ok = new.rank() == rank and new.size() == 2 and torch.equal(z, torch.arange(513, dtype=torch.float64) * 3)
print("SHRUNK", "ok" if ok else "WRONG", new.rank(), new.size(), flush=True)
os._exit(0)
"""


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_shrink_group_after_a_kill():
    port = _port()
    env = dict(os.environ, ACTORCC_SOCKET_ADDR="127.0.0.1", ACTORCC_TIMEOUT_S="10")
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(r), port], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env) for r in range(3)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=60)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a rank did not finish within 60 s")
    assert procs[2].returncode == -9, outs[2]
    for r in (0, 1):
        assert procs[r].returncode == 0, outs[r]
        assert "ERROR:" in outs[r] and "rank 2" in outs[r].split("ERROR:")[1], outs[r]
        assert f"SHRUNK ok {r} 2" in outs[r], outs[r]
    if hasattr(torch.distributed, "shrink_group"):
        assert "TORCH-SHRINK refused" in outs[1], outs[1]
