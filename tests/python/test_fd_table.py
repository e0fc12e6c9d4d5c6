"""The descriptor table actorcc's libraries grow when they load (src/common/fd_table.hpp): a
process that loads libnccl.so.2 or imports actorcc, with one thread or several, holds at least
4096 slots (or its soft limit on descriptors) afterwards, and so does a child of fork(), which
the kernel starts with a small table; no descriptor is left open or touched by it. Without it a
group's first join could wait for an RCU grace period in accept() or socket() (18 ms measured)."""
import json
import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent("""
    import ctypes, json, os, resource, sys, threading
    def slots():
        for line in open("/proc/self/status"):
            if line.startswith("FDSize:"):
                return int(line.split()[1])
    mode, lib, soft = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    stop = threading.Event()
    if mode == "threads":
        for _ in range(3):
            threading.Thread(target=stop.wait, daemon=True).start()
    fds = sorted(os.listdir("/proc/self/fd"))
    out = {"before": slots()}
    if lib == "import":
        import actorcc
    else:
        ctypes.CDLL(lib)
    out["after"] = slots()
    out["fds_same"] = sorted(os.listdir("/proc/self/fd")) == fds
    if mode == "fork":
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, str(slots()).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        out["child"] = int(os.read(r, 32))
    print(json.dumps(out))
""")


def run(mode, lib, soft=0):
    p = subprocess.run([sys.executable, "-c", PROBE, mode, lib, str(soft)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.splitlines()[-1])


def want(soft=0):
    import resource
    cur = soft or resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 4096 if cur == resource.RLIM_INFINITY else min(4096, cur)


@pytest.mark.parametrize("mode", ["one", "threads", "fork"])
@pytest.mark.parametrize("which", ["libnccl.so.2", "import actorcc"])
def test_loading_grows_the_table(mode, which, request):
    lib = request.getfixturevalue("nccl_lib") if which == "libnccl.so.2" else "import"
    out = run(mode, lib)
    if out["before"] >= want():
        pytest.skip(f"the table already has {out['before']} slots before the load")
    assert out["after"] >= want(), out
    assert out["fds_same"], "loading left a descriptor open or closed one"
    if mode == "fork":
        assert out["child"] >= want(), out


def test_soft_limit_caps_the_growth(nccl_lib):
    """Under a soft limit of 300 descriptors the table grows to cover them (the kernel rounds the
    size up to a power of two) and no further, and the load does not fail."""
    out = run("threads", nccl_lib, soft=300)
    if out["before"] >= 300:
        pytest.skip(f"the table already has {out['before']} slots before the load")
    assert 300 <= out["after"] < 4096, out
    assert out["fds_same"]
