"""actorcc's libnccl.so.2 as today's Python clients call it, through ctypes as they do: vLLM 0.33's
PyNccl parses ncclGetVersion and gates features on it; nccl4py 0.6.0 reads Communicator.properties
(ncclCommQueryProperties, 2.31.2's struct), runs every config= collective through the 2.31
nccl*Config calls and lists the parameters (ncclParam*). One rank on the CPU-only mode, in a fresh
process, so ACTORCC_BACKEND is read before the library loads."""
import os
import subprocess
import sys
import textwrap

import actorcc.nccl

CLIENT = textwrap.dedent(r'''
    import ctypes, sys
    lib = ctypes.CDLL(sys.argv[1])
    # vLLM's parse of the 5-digit code, then its gates.
    v = ctypes.c_int()
    assert lib.ncclGetVersion(ctypes.byref(v)) == 0
    s = str(v.value)
    assert (s[0], s[1:3], s[3:]) == ("2", "32", "03"), s
    assert v.value >= 22907 and v.value >= 23004
    print("version", v.value)

    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_byte * 128)]
    uid, comm = UniqueId(), ctypes.c_void_p()
    assert lib.ncclGetUniqueId(ctypes.byref(uid)) == 0
    assert lib.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0

    class Properties(ctypes.Structure):  # 2.31.2's ncclCommProperties_t, as nccl4py binds it
        _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                    ("rank", ctypes.c_int), ("nRanks", ctypes.c_int), ("cudaDev", ctypes.c_int),
                    ("nvmlDev", ctypes.c_int), ("deviceApiSupport", ctypes.c_uint8),
                    ("multimemSupport", ctypes.c_uint8), ("ginType", ctypes.c_int), ("nLsaTeams", ctypes.c_int),
                    ("hostRmaSupport", ctypes.c_uint8), ("railedGinType", ctypes.c_int),
                    ("commHash", ctypes.c_uint64), ("ginMinStride", ctypes.c_int),
                    ("ginConnectionType", ctypes.c_int), ("ginSupport", ctypes.c_uint8 * 64),
                    ("devCommRuntimeVersionSize", ctypes.c_size_t)]
    assert ctypes.sizeof(Properties) == 144
    p = Properties(size=144, magic=0xcafebeef, version=23102)
    p.nvmlDev = 99
    assert lib.ncclCommQueryProperties(comm, ctypes.byref(p)) == 0
    assert (p.rank, p.nRanks, p.cudaDev, p.nvmlDev) == (0, 1, -1, -1)
    assert not p.deviceApiSupport and not p.multimemSupport and p.ginType == 0
    print("properties", p.rank, p.nRanks, p.deviceApiSupport)

    class CollConfig(ctypes.Structure):  # 2.32.3's ncclCollConfig_t
        _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                    ("ext", ctypes.c_void_p), ("minCTAs", ctypes.c_int), ("maxCTAs", ctypes.c_int),
                    ("nvlsCTAs", ctypes.c_int), ("cgaClusterSize", ctypes.c_int), ("algSelection", ctypes.c_char_p),
                    ("forceAlgSelection", ctypes.c_int), ("CTAPolicy", ctypes.c_int),
                    ("userProfilerTag", ctypes.c_uint64), ("launchCompletionEvent", ctypes.c_void_p)]
    unset = -2**31
    cfg = CollConfig(72, 0xcafebeef, 23203, None, unset, 8, unset, unset, b"ring", 1, unset, 42, None)
    x = (ctypes.c_double * 3)(1.0, 2.0, 3.0)
    y = (ctypes.c_double * 3)()
    assert lib.ncclAllReduceConfig(x, y, ctypes.c_size_t(3), 8, 0, comm, None, ctypes.byref(cfg)) == 0
    assert list(y) == [1.0, 2.0, 3.0], list(y)
    cfg.forceAlgSelection = 5
    assert lib.ncclAllReduceConfig(x, y, ctypes.c_size_t(3), 8, 0, comm, None, ctypes.byref(cfg)) == 4
    lib.ncclGetLastError.restype = ctypes.c_char_p
    assert b"forceAlgSelection" in lib.ncclGetLastError(comm)
    print("config collectives ok")

    keys, n = ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_int()
    assert lib.ncclParamGetAllParameterKeys(ctypes.byref(keys), ctypes.byref(n)) == 0
    names = [keys[i].decode() for i in range(n.value)]
    value, vlen = ctypes.c_char_p(), ctypes.c_int()
    assert lib.ncclParamGetParameter(b"ACTORCC_TIMEOUT_S", ctypes.byref(value), ctypes.byref(vlen)) == 0
    assert value.value == b"4", value.value
    h = ctypes.c_void_p()
    assert lib.ncclParamBind(ctypes.byref(h), b"NCCL_IB_HCA") == 4
    print("params", ",".join(names))
    assert lib.ncclCommDestroy(comm) == 0
''')


def test_clients_calls(tmp_path):
    lib = actorcc.nccl.library_path()
    env = dict(os.environ, ACTORCC_BACKEND="cpu", ACTORCC_TIMEOUT_S="4", ACTORCC_SOCKET_ADDR="127.0.0.1")
    p = subprocess.run([sys.executable, "-c", CLIENT, lib], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "version 23203" in p.stdout and "config collectives ok" in p.stdout, p.stdout
    assert "ACTORCC_TIMEOUT_S" in p.stdout and "NCCL_ALGO" in p.stdout, p.stdout
    # actorcc.nccl's own report of the library says the same version.
    assert actorcc.nccl.describe(lib)["version"] == "2.32.3"
