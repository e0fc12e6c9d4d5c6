"""A program that ends with a communicator still open exits quietly: torch.distributed keeps
a process group that destroy_process_group() never removed alive past the interpreter, and the
extension's objects it held made nanobind print "leaked instances ... reference counting issue"
at every such exit. Each rank is a fresh interpreter (the warning comes at its teardown)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from conftest import free_port  # noqa: E402

# Rank argv[1] of 2: one all_reduce over the "actorcc" backend, then the end of the script
# without destroy_process_group().
RANK = """
import sys
import torch
import torch.distributed as dist
import actorcc.torch  # noqa: F401 - registers the backend
rank = int(sys.argv[1])
dist.init_process_group("actorcc", rank=rank, world_size=2, timeout=__import__("datetime").timedelta(seconds=30))
t = torch.full((1000,), float(rank + 1))
dist.all_reduce(t)
assert torch.all(t == 3), t[:4]
print("done", rank, flush=True)
"""


def test_torch_program_without_destroy_process_group_exits_without_leak_warnings():
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    procs = [subprocess.Popen([sys.executable, "-c", RANK, str(r)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    for r, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        assert p.returncode == 0 and f"done {r}" in out, f"rank {r}: rc {p.returncode}\n{out}\n{err}"
        assert "leaked" not in err, f"rank {r}:\n{err}"
