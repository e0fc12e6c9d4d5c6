import os
import shutil
import sys
import tempfile

import pytest

# Keep Ray (when the Ray tests run) on loopback: with this, Ray's node address is 127.0.0.1
# instead of the machine's interface address, so every test connection stays on 127.0.0.0/8.
# Must be set before ray is imported; Ray's workers inherit it.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

# The tests' Ray instances are private: their sockets, logs and the "current cluster" file that
# a plain ray.init() reads (<temp dir>/ray/ray_current_cluster, written by
# ray.cluster_utils.Cluster) live in a temp dir of this session (RAY_TMPDIR, inherited by the
# examples and helper processes the tests start), and RAY_ADDRESS is unset, so a user's own
# ray.init() in another shell never attaches to a test cluster, nor a test to the user's.
# Both are restored when the session ends. A short path: Ray's Unix sockets live under it.
USER_RAY_ENV = {k: os.environ.get(k) for k in ("RAY_ADDRESS", "RAY_TMPDIR")}
RAY_TMPDIR = tempfile.mkdtemp(prefix="actorcc-ray-", dir="/tmp")
os.environ.pop("RAY_ADDRESS", None)
os.environ["RAY_TMPDIR"] = RAY_TMPDIR


def pytest_sessionfinish(session, exitstatus):
    for k, v in USER_RAY_ENV.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    shutil.rmtree(RAY_TMPDIR, ignore_errors=True)


def user_env():
    """The environment as the user's own shell has it (without the tests' Ray isolation)."""
    env = dict(os.environ)
    for k, v in USER_RAY_ENV.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # mp_helpers / workers, also for spawned children


@pytest.fixture
def uid():
    import actorcc
    # loopback only: the tests never send traffic to another address
    return str(actorcc.UniqueId.create("127.0.0.1"))


@pytest.fixture
def nccl_lib():
    """The path of actorcc's libnccl.so.2 under test (actorcc.nccl.library_path(): the installed
    one, or $ACTORCC_NCCL_ABI_LIB); skips where the package was built without it."""
    nccl = pytest.importorskip("actorcc.nccl")
    try:
        return nccl.library_path()
    except Exception as e:  # a package built without the library
        pytest.skip(f"no libnccl.so.2 in this build: {e}")


NO_GROUP_PASSED = "this torch passes no group to a backend's creator: the group's device is unknown at its creation"


def torch_passes_its_group(torch):
    """Whether torch hands a backend's creator the group it made, whose bound device tells the
    "actorcc" backend which communicator to form at the group's creation: only where its backend
    options have a `process_group` field (torch 2.15 does, 2.11 does not; without it the first
    call with each device's tensors forms that communicator)."""
    return "process_group" in dir(torch._C._distributed_c10d._DistributedBackendOptions)


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
