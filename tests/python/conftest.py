import os
import sys

import pytest

# Keep Ray (when the Ray tests run) on loopback: with this, Ray's node address is 127.0.0.1
# instead of the machine's interface address, so every test connection stays on 127.0.0.0/8.
# Must be set before ray is imported; Ray's workers inherit it.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # mp_helpers / workers, also for spawned children


@pytest.fixture
def uid():
    import actorcc
    # loopback only: the tests never send traffic to another address
    return str(actorcc.UniqueId.create("127.0.0.1"))


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
