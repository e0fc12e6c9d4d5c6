"""Single-process tests: the package, UniqueId, errors, argument checks (world_size 1)."""
import pickle

import numpy as np
import pytest

import actorcc
from conftest import free_port


def test_package():
    assert actorcc.__version__
    assert set(actorcc.SUPPORTED_DTYPES) == {
        "float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "int64"}
    assert isinstance(actorcc.built_with_cuda, bool)


def test_error_hierarchy():
    assert issubclass(actorcc.InvalidArgumentError, actorcc.Error)
    assert issubclass(actorcc.InvalidArgumentError, ValueError)
    assert issubclass(actorcc.TimeoutError, actorcc.Error)
    import builtins
    assert issubclass(actorcc.TimeoutError, builtins.TimeoutError)
    assert issubclass(actorcc.RemoteError, actorcc.Error)
    assert issubclass(actorcc.SystemCallError, OSError)
    assert issubclass(actorcc.UnsupportedError, NotImplementedError)
    assert issubclass(actorcc.Error, RuntimeError)
    for cls in (actorcc.Error, actorcc.RemoteError, actorcc.TimeoutError, actorcc.InvalidArgumentError):
        assert cls.__module__ == "actorcc"
        e = cls("x")
        e.rank = 3
        e2 = pickle.loads(pickle.dumps(e))
        assert type(e2) is cls and e2.rank == 3


def test_unique_id_roundtrip():
    u = actorcc.UniqueId.create("127.0.0.1")
    s = str(u)
    assert len(s) == 256
    assert actorcc.UniqueId.parse(s) == u
    assert pickle.loads(pickle.dumps(u)) == u
    assert actorcc.UniqueId.from_bytes(u.to_bytes()) == u
    assert hash(actorcc.UniqueId.parse(s)) == hash(u)
    v = actorcc.UniqueId.create("127.0.0.1")
    assert u != v and u != "x"
    assert "UniqueId" in repr(u)
    with pytest.raises(actorcc.InvalidArgumentError):
        actorcc.UniqueId.parse("zz")
    with pytest.raises(actorcc.InvalidArgumentError):
        actorcc.UniqueId.from_bytes(b"123")


def test_world_one(uid):
    with actorcc.Communicator(uid, 0, 1, backend="cpu", timeout=10, join_timeout=10) as c:
        assert (c.rank, c.world_size, c.backend, c.device) == (0, 1, "cpu", -1)
        assert c.num_nodes == 1 and len(c.peers) == 1 and c.peers[0]["rank"] == 0
        a = np.arange(10, dtype=np.float32)
        assert c.all_reduce(a) is a
        assert np.array_equal(a, np.arange(10))
        g = c.all_gather(a.reshape(2, 5))
        assert g.shape == (2, 5) and g.dtype == np.float32
        assert c.allgather_bytes(b"abc") == [b"abc"]
        c.host_barrier()
        c.barrier()
        assert isinstance(c.plan("all_reduce", 4096), str)
        assert "rank 0/1" in repr(c)
    assert c.closed


def test_bad_args_world_one(uid):
    c = actorcc.Communicator(uid, 0, 1, backend="cpu", timeout=10)
    a = np.arange(16, dtype=np.float32)
    with pytest.raises(actorcc.InvalidArgumentError, match="contiguous"):
        c.all_reduce(a[::2])
    with pytest.raises(ValueError, match="dtype mismatch"):
        c.all_reduce(a, out=np.empty(16, np.int32))
    with pytest.raises(actorcc.InvalidArgumentError, match="elements"):
        c.all_gather(a, out=np.empty(15, np.float32))
    with pytest.raises(actorcc.InvalidArgumentError, match="read-only"):
        ro = a.copy()
        ro.flags.writeable = False
        c.all_reduce(ro)
    # a read-only input is fine when the output is separate
    ro = a.copy()
    ro.flags.writeable = False
    out = np.empty_like(a)
    c.all_reduce(ro, out=out)
    assert np.array_equal(out, a)
    with pytest.raises(actorcc.InvalidArgumentError):
        actorcc.Communicator(uid, 0, 1, timeout=-1)
    c.close()
    with pytest.raises(actorcc.Error, match="closed"):
        c.all_reduce(a)


def test_bad_rank(uid):
    with pytest.raises(actorcc.InvalidArgumentError):
        actorcc.Communicator(uid, 2, 2, backend="cpu", join_timeout=5)


def test_join_timeout_names_missing_rank(uid):
    import time
    t0 = time.monotonic()
    with pytest.raises(actorcc.TimeoutError) as ei:
        actorcc.Communicator(uid, 0, 3, backend="cpu", join_timeout=1.5)
    assert time.monotonic() - t0 < 15
    assert isinstance(ei.value, TimeoutError)
    assert "1" in str(ei.value) and "2" in str(ei.value)
    # The first rank that did not join; the text lists them all.
    assert ei.value.culprit == 1 and ei.value.observer_rank == 0


def test_bfloat16_numpy(uid):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    with actorcc.Communicator(uid, 0, 1, backend="cpu") as c:
        a = np.array([1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16)
        g = c.all_gather(a)
        assert g.dtype == a.dtype and np.array_equal(g.astype(np.float32), a.astype(np.float32))


def test_torch_cpu(uid):
    torch = pytest.importorskip("torch")
    with actorcc.Communicator(uid, 0, 1, backend="cpu") as c:
        for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8,
                   torch.int32, torch.int64):
            t = torch.arange(6, dtype=dt).reshape(2, 3)
            assert c.all_reduce(t) is t
            g = c.all_gather(t)
            assert isinstance(g, torch.Tensor) and g.dtype == dt and g.shape == (2, 3)
        p = torch.nn.Parameter(torch.ones(4))  # requires grad: DLPack would refuse it
        c.broadcast(p.data, root=0)
        c.broadcast(p, root=0)
        with pytest.raises(actorcc.InvalidArgumentError, match="contiguous"):
            c.all_reduce(torch.ones(4, 4).t())
        with pytest.raises(actorcc.InvalidArgumentError, match="dtype"):
            c.all_reduce(torch.ones(4, dtype=torch.complex64))


def test_auto_backend_and_from_address():
    # backend="auto": CUDA where every rank has a GPU, else the CPU backend (CI has no GPU)
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with actorcc.Communicator.from_address("127.0.0.1", port, 0, 1, timeout=10, join_timeout=10) as c:
        assert c.backend in ("cpu", "cuda")
        if c.backend == "cpu":
            x = np.ones(3, np.int64)
            c.all_reduce(x, op="prod")
            assert list(x) == [1, 1, 1]
        with pytest.raises(actorcc.InvalidArgumentError):
            c.all_reduce(np.ones(3), op="nope")
    with pytest.raises(actorcc.InvalidArgumentError):
        actorcc.Communicator.from_address("127.0.0.1", 0, 0, 1)


@pytest.mark.parametrize("dtype, name", [
    (object, "object"), ("datetime64[s]", "datetime64[s]"), ("timedelta64[ms]", "timedelta64[ms]"),
    ([("a", "<i4"), ("b", "<f4")], "[('a', '<i4'), ('b', '<f4')]"), ("<U3", "<U3"),
    (bool, "bool"), (np.complex64, "complex64"), (np.int16, "int16"), (np.uint32, "uint32"),
])
def test_unsupported_dtype_is_named(uid, dtype, name):
    # numpy dtypes DLPack cannot describe (object, datetime, string, structured) used to give
    # "expected a tensor/array supporting DLPack ..., got ndarray", and bool "bool8"
    supported = "(supported: " if name in ("bool", "complex64", "int16", "uint32") else "(ndarray; supported: "
    with actorcc.Communicator(uid, 0, 1, backend="cpu", timeout=10) as c:
        for args in ((np.zeros(4, dtype),), (np.zeros(4, np.float32), "sum", np.zeros(4, dtype))):
            with pytest.raises(actorcc.InvalidArgumentError) as ei:
                c.all_reduce(*args)
            msg = str(ei.value)
            assert f"unsupported dtype {name} {supported}" in msg, msg
            assert ", ".join(actorcc.SUPPORTED_DTYPES) in msg, msg
            assert "rank 0" in msg and "bool8" not in msg
        c.all_reduce(np.zeros(4, np.float32))  # still usable
    with actorcc.Communicator(actorcc.UniqueId.create("127.0.0.1"), 0, 1, backend="cpu") as c:
        with pytest.raises(actorcc.InvalidArgumentError, match="DLPack or the buffer protocol, got list"):
            c.all_reduce([1.0, 2.0])  # not an array at all: the old message still fits


def _gpu_usable():
    try:
        actorcc.Communicator(actorcc.UniqueId.create("127.0.0.1"), 0, 1, backend="cuda", join_timeout=10).close()
        return True
    except actorcc.UnsupportedError:
        return False


@pytest.mark.parametrize("device", [0, 3, "cuda:3", "cuda"])
def test_gpu_device_without_gpu_raises(device):
    # device=0 / 'cuda:N' used to fall back to the CPU backend in silence where there is no GPU
    if _gpu_usable():
        pytest.skip("a GPU is usable here")
    with pytest.raises(actorcc.UnsupportedError) as ei:
        actorcc.Communicator(actorcc.UniqueId.create("127.0.0.1"), 0, 1, device=device, join_timeout=10)
    assert f"device={device!r}" in str(ei.value) and "no CUDA device" in str(ei.value), str(ei.value)
    assert ei.value.rank == 0
    with pytest.raises(actorcc.UnsupportedError, match="no CUDA device"):
        actorcc.Communicator.from_address("127.0.0.1", free_port(), 0, 1, device=device, join_timeout=10)


def test_device_and_backend_checked():
    # A rank's own mistake ends its group (the others must not wait for it: test_join_refusal.py),
    # so each attempt here gets a new id.
    def uid():
        return actorcc.UniqueId.create("127.0.0.1")
    with pytest.raises(actorcc.InvalidArgumentError, match="contradict"):
        actorcc.Communicator(uid(), 0, 1, device=0, backend="cpu")
    with pytest.raises(actorcc.InvalidArgumentError, match="device must be"):
        actorcc.Communicator(uid(), 0, 1, device="gpu0")
    with actorcc.Communicator(uid(), 0, 1, device="cpu", join_timeout=10) as c:
        assert c.backend == "cpu"


def test_from_bytes_refuses_a_corrupt_id_saying_what_is_wrong():
    # from_bytes() took any 128 bytes; the constructor then warned about a
    # successor socket before its error. Now from_bytes() checks what parse() checks.
    b = bytearray(actorcc.UniqueId.create("127.0.0.1").to_bytes())
    b[100] = 1
    with pytest.raises(actorcc.InvalidArgumentError, match="corrupt actorcc UniqueId: reserved bytes are not zero"):
        actorcc.UniqueId.from_bytes(bytes(b))
    with pytest.raises(actorcc.InvalidArgumentError, match="bad magic"):
        actorcc.UniqueId.from_bytes(bytes(128))
