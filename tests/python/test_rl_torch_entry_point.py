"""torch's backend entry point: torch (2.15) reads the "torch.distributed.backends" entry-point group
when init_process_group meets a backend name it does not know, and calls the registrar the
entry point names. The installed actorcc declares itself there, so a process a launcher starts
gets backend "actorcc" without importing actorcc. Runs in a fresh interpreter, so nothing in
this test process (which may have imported actorcc) registers it."""
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

_CHILD = textwrap.dedent("""
    import sys, tempfile
    import torch, torch.distributed as dist
    if not hasattr(dist.Backend, "_ensure_backend_registered"):
        print("SKIP: this torch does not read the torch.distributed.backends group")
        sys.exit(0)
    store = dist.FileStore(tempfile.mktemp(), 1)
    dist.init_process_group("actorcc", store=store, rank=0, world_size=1)
    t = torch.arange(4, dtype=torch.float32)
    dist.all_reduce(t)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0], t
    assert dist.get_backend() == "actorcc", dist.get_backend()
    dist.destroy_process_group()
    print("OK", "actorcc" in sys.modules)
""")


def test_init_process_group_without_importing_actorcc():
    r = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    if r.stdout.startswith("SKIP"):
        pytest.skip(r.stdout.strip())
    assert r.stdout.split()[0] == "OK", r.stdout
