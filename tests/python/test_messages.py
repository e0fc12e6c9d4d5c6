"""Issue 47 point 8: messages that misled. A lost root said "a group cannot outlive the process
hosting its root", though the survivors can shrink to a group of their own at once; a loopback
from_address warned on every rank, the doctor's included, about a secret that loopback does not
need."""
import os
import subprocess
import sys

import refuse_workers as W
from mp_helpers import run_ranks, values

HERE = os.path.dirname(os.path.abspath(__file__))


def test_a_lost_root_says_how_the_survivors_go_on_and_that_works():
    import multiprocessing as mp

    import workers
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    root = ctx.Process(target=workers.host_root, args=(child,), daemon=True)
    root.start()
    try:
        uid = parent.recv()
        res = values(run_ranks(3, W.follow_root_loss_advice, uid, root.pid, timeout=90))
    finally:
        root.kill()
        root.join(5)
    for r, (text, total, world) in enumerate(res):
        assert "lost the connection to the actorcc root" in text, (r, text)
        assert "cannot outlive" not in text, (r, text)
        assert "comm.shrink(exclude=[]) on each of them" in text, (r, text)
        assert (total, world) == (6.0, 3), (r, total, world)


_TWO_LOOPBACK_GROUPS = r"""
import sys
import actorcc
from conftest import free_port
for _ in range(2):
    with actorcc.Communicator.from_address("127.0.0.1", free_port(), 0, 1, backend="cpu", join_timeout=10) as c:
        c.host_barrier()
print("done")
"""


def _run(env_extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]), **env_extra)
    env.pop("ACTORCC_BOOTSTRAP_SECRET", None)
    p = subprocess.run([sys.executable, "-c", _TWO_LOOPBACK_GROUPS], capture_output=True, text=True, timeout=60,
                       env=env, cwd="/")
    assert "done" in p.stdout, p.stdout + p.stderr
    return p.stderr


def test_loopback_from_address_warns_about_no_secret_nowhere_and_notes_it_once():
    # Default log level: loopback needs no secret (docs/reliability.md), so nothing is printed.
    err = _run({"ACTORCC_LOG": "warn"})
    assert "ACTORCC_BOOTSTRAP_SECRET" not in err, err
    # ACTORCC_LOG=info: one note per process, however many groups it forms.
    err = _run({"ACTORCC_LOG": "info"})
    notes = [line for line in err.splitlines() if "ACTORCC_BOOTSTRAP_SECRET" in line]
    assert len(notes) == 1 and "INFO" in notes[0], err
