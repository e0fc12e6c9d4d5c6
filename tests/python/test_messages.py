"""Messages that misled. A loopback from_address warned on every rank, the
doctor's included, about a secret that loopback does not need. (A lost root's advice to shrink:
test_multiprocess.py, test_group_fails_when_the_root_process_dies.)"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


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
