"""actorcc-doctor: every rule on synthetic facts (fires on its case, silent otherwise), the
mapping of CUDA_VISIBLE_DEVICES, NVML facts from a fake NVML, local mode on this machine, and
group mode over real ranks on the CPU backend (skipped until actorcc._actorcc is built)."""
from __future__ import annotations

import copy
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The doctor is pure Python: where actorcc's extension is not built, its modules are loaded
# from the source tree under a bare `actorcc` package (actorcc/__init__.py needs the extension).
_BARE = """import sys, types, runpy
try:
    import actorcc
except ImportError:
    pkg = types.ModuleType('actorcc'); pkg.__path__ = [{path!r}]; sys.modules['actorcc'] = pkg
"""
try:
    import actorcc.doctor  # noqa: F401
    EXTENSION = True
except ImportError:
    EXTENSION = False
    for m in [m for m in sys.modules if m == "actorcc" or m.startswith("actorcc.")]:
        del sys.modules[m]
    exec(_BARE.format(path=str(ROOT / "python" / "actorcc")))

from actorcc.doctor import facts, group, nvml, report, rules  # noqa: E402

PKG_DIR = str(Path(os.path.abspath(facts.__file__)).parents[1])  # not resolved: keep symlinked trees


# ---------------------------------------------------------------- a fake NVML
class FakeNvml:
    """n GPUs; topology 'nvswitch' (18 links each to switches), 'pairs' (NV4 between 0-1, 2-3...)
    or 'pcie'; fabric state per GPU."""

    def __init__(self, n=8, topology="nvswitch", fabric="completed", driver="580.159.04"):
        self.n, self.topology, self.fabric_state, self.driver = n, topology, fabric, driver

    def driver_version(self):
        return self.driver

    def cuda_driver_version(self):
        return 13000

    def count(self):
        return self.n

    def handle(self, i):
        return i

    def name(self, h):
        return "NVIDIA H200"

    def uuid(self, h):
        return f"GPU-{h:08x}-aaaa-bbbb-cccc-dddddddddddd"

    def pci_bus_id(self, h):
        return f"0000:{0x18 + 0x10 * h:02x}:00.0"

    def nvlink_active(self, h, link):
        if self.topology == "nvswitch":
            return True
        if self.topology == "pairs":
            return link < 4
        raise nvml.NvmlError("not supported")

    def nvlink_remote(self, h, link):
        if self.topology == "nvswitch":
            return nvml.DEVICE_TYPE_SWITCH, f"0000:{0xa0 + link % 4:02x}:00.0"
        return nvml.DEVICE_TYPE_GPU, self.pci_bus_id(h ^ 1)

    def common_ancestor(self, a, b):
        return 50 if (a < self.n // 2) != (b < self.n // 2) else 40

    def p2p_status(self, a, b, idx):
        return 0

    def fabric(self, h):
        if self.fabric_state is None:
            raise nvml.NvmlError("not supported")
        return {"state": self.fabric_state, "status": 0, "clique_id": 1, "cluster_uuid": "00" * 16}


def make_facts(cvd="3", env=None, nccl="2.28.9", n=8, topology="nvswitch", fabric="completed",
               ib=(), vmm="ok", host="node-a", driver="580.159.04", actorcc_version="0.1.0"):
    nv = nvml.query(FakeNvml(n, topology, fabric, driver)) if n else {
        "available": False, "error": "cannot load libnvidia-ml.so.1", "driver_version": None,
        "cuda_driver_version": None, "gpus": [], "links": {}, "nvswitch": False}
    gpus = nv["gpus"] if nv["available"] else None
    f = {"schema": 1, "host": {"hostname": host, "host_id": f"{host}/boot", "pid": 1},
         "nvml": nv, "visible": facts.map_visible(cvd, gpus), "env": {"nccl": dict(env or {}), "other": {}},
         "nccl": {"version": nccl, "versions_differ": False, "torch": {},
                  "candidates": [{"source": "test", "path": "/opt/libnccl.so.2", "version": nccl}] if nccl else []},
         "ib_devices": list(ib), "vmm": {"status": vmm, "detail": "cuMemSetAccess: CUDA_ERROR_INVALID_DEVICE",
                                         "gpus": [0, 1]},
         "actorcc_version": actorcc_version}
    f["gpu"] = facts.current_gpu(f, 0)
    return f


def make_group(per_rank, measure=None):
    ranks = []
    for r, f in enumerate(per_rank):
        f = copy.deepcopy(f)
        f["rank"] = r
        ranks.append(f)
    nodes = group.assign_nodes(ranks)
    return {"mode": "group", "world": len(ranks), "backend": "cuda", "ranks": ranks, "nodes": nodes,
            "measure": measure or {"first_collective_s": [0.01] * len(ranks), "bandwidth": []}}


def actor_group(n=4, env_for=lambda r: {}, cvd_for=lambda r: str(r), **kw):
    return make_group([make_facts(cvd=cvd_for(r), env=env_for(r), **kw) for r in range(n)])


# ---------------------------------------------------------------- rule cases
# rule id -> (facts where it must fire, facts where it must stay silent)
CASES = {
    "cumem-masked-import": (lambda: make_facts(cvd="3"),
                            lambda: make_facts(cvd="3", env={"NCCL_CUMEM_ENABLE": "0"})),
    "nvls-permuted-allgather": (lambda: make_facts(cvd="1,2,3,4,5,6,7,0", nccl="2.26.2"),
                                lambda: make_facts(cvd="1,2,3,4,5,6,7,0", nccl="2.21.5")),
    "ring-hang-masked-nvswitch": (lambda: make_facts(cvd="5", env={"NCCL_ALGO": "Ring,Tree"}),
                                  lambda: make_facts(cvd="5", env={"NCCL_ALGO": "Tree"})),
    "cvd-invalid": (lambda: make_facts(cvd="2,9,3"), lambda: make_facts(cvd="2,3")),
    "fabric-not-ready": (lambda: make_facts(fabric="in-progress"), lambda: make_facts(fabric="completed")),
    "p2p-disabled": (lambda: make_facts(env={"NCCL_P2P_DISABLE": "1"}),
                     lambda: make_facts(env={"NCCL_P2P_DISABLE": "0"})),
    "shm-disabled": (lambda: make_facts(env={"NCCL_SHM_DISABLE": "1"}), lambda: make_facts()),
    "p2p-level-low": (lambda: make_facts(cvd=None, topology="pcie", fabric=None, env={"NCCL_P2P_LEVEL": "PIX"}),
                      lambda: make_facts(cvd=None, topology="pcie", fabric=None, env={"NCCL_P2P_LEVEL": "SYS"})),
    "net-socket-forced": (lambda: make_facts(env={"NCCL_NET": "Socket"}, ib=["mlx5_0"]),
                          lambda: make_facts(env={"NCCL_NET": "Socket"})),
    "ib-disabled": (lambda: make_facts(env={"NCCL_IB_DISABLE": "1"}, ib=["mlx5_0"]),
                    lambda: make_facts(env={"NCCL_IB_DISABLE": "1"})),
    "hostid-set": (lambda: make_facts(env={"NCCL_HOSTID": "fake-node-1"}), lambda: make_facts()),
    "few-channels": (lambda: make_facts(env={"NCCL_MAX_NCHANNELS": "1"}),
                     lambda: make_facts(env={"NCCL_MAX_NCHANNELS": "32"})),
    "vmm-fd-sharing-failed": (lambda: make_facts(vmm="failed"), lambda: make_facts(vmm="skipped")),
    "cvd-order-ambiguous": (lambda: _mixed_models("1,0"), lambda: _mixed_models(None)),
    "nccl-multiple-copies": (lambda: _two_nccls(), lambda: make_facts()),
    "no-nvml": (lambda: make_facts(n=0, cvd=None), lambda: make_facts()),
    "nccl-abi-mixed": (lambda: _abi("nvidia", warnings=["two NCCL libraries are mapped into this process"]),
                       lambda: _abi("actorcc")),
    "group-join-failed": (lambda: dict(make_facts(), group_join={
                              "rank": 0, "world": 2, "join_timeout_s": 2.0,
                              "error": "TimeoutError: rank 1 of 2 did not join within 2 s"}),
                          lambda: make_facts()),
    # group rules
    "nccl-version-mismatch": (lambda: make_group([make_facts("0"), make_facts("1", nccl="2.27.3")]),
                              lambda: actor_group(2)),
    "nccl-provider-mismatch": (lambda: make_group([_abi("actorcc", cvd="0"), _abi("nvidia", cvd="1")]),
                               lambda: make_group([_abi("actorcc", cvd="0"), _abi("actorcc", cvd="1")])),
    "driver-version-mismatch": (lambda: make_group([make_facts("0"), make_facts("0", host="b", driver="570.1")]),
                                lambda: actor_group(2)),
    "actorcc-version-mismatch": (lambda: make_group([make_facts("0"), make_facts("1", actorcc_version="0.2.0")]),
                                 lambda: actor_group(2)),
    "nccl-env-mismatch": (lambda: actor_group(3, env_for=lambda r: {"NCCL_ALGO": "Tree"} if r != 1 else {}),
                          lambda: actor_group(3, env_for=lambda r: {"NCCL_ALGO": "Tree"})),
    "cvd-shape-mismatch": (lambda: actor_group(3, cvd_for=lambda r: None if r == 2 else str(r)),
                           lambda: actor_group(3)),
    "shared-gpu": (lambda: actor_group(2, cvd_for=lambda r: "4"), lambda: actor_group(2)),
    "nvls-rank-order": (lambda: actor_group(4, cvd_for=lambda r: "3210"[r]),
                        lambda: actor_group(4, cvd_for=lambda r: "3210"[r], env_for=lambda r: {"NCCL_NVLS_ENABLE": "0"})),
    "collective-failed": (lambda: make_group([make_facts("0"), make_facts("1")], {
                              "first_collective_s": [], "bandwidth": [],
                              "collective_errors": {"1": "TimeoutError: rank 0 did not answer"}}),
                          lambda: actor_group(2)),
    "first-collective-slow": (lambda: make_group([make_facts("0"), make_facts("1")],
                                                 {"first_collective_s": [0.01, 3.6], "bandwidth": []}),
                              lambda: actor_group(2)),
    "bandwidth-low": (lambda: make_group([make_facts("0"), make_facts("1")], _bw(20.0)),
                      lambda: make_group([make_facts("0"), make_facts("1")], _bw(300.0))),
    "ib-disabled-multinode": (
        lambda: make_group([make_facts("0", host=h, env={"NCCL_IB_DISABLE": "1"}, ib=["mlx5_0"]) for h in "ab"]),
        lambda: make_group([make_facts("0", host=h, ib=["mlx5_0"]) for h in "ab"])),
}


def _mixed_models(cvd):
    f = make_facts(cvd=cvd, n=2, topology="pcie")
    f["nvml"]["gpus"][1]["name"] = "NVIDIA L40S"
    f["visible"] = facts.map_visible(cvd, f["nvml"]["gpus"])
    return f


def _abi(provider, warnings=(), cvd="3"):
    """Facts of a process whose NCCL library (actorcc.nccl.check) is `provider`'s."""
    f = make_facts(cvd=cvd)
    f["nccl"]["abi"] = {"provider": provider, "how": "loaded", "path": f"/opt/{provider}/libnccl.so.2",
                        "version": "2.28.9", "note": "actorcc 0.1.0 nccl-abi 22809" if provider == "actorcc" else None,
                        "warnings": list(warnings)}
    return f


def _two_nccls():
    f = make_facts()
    f["nccl"]["candidates"].append({"source": "dlopen", "path": "/usr/lib/libnccl.so.2", "version": "2.21.5"})
    f["nccl"]["versions_differ"] = True
    return f


def _bw(busbw):
    return {"first_collective_s": [0.01, 0.01], "bandwidth": [
        {"scope": "node node-a (2 ranks)", "node": 0, "bytes": 256 << 20, "time_s": 1e-3,
         "algbw_gbs": busbw, "busbw_gbs": busbw, "expected_busbw_gbs": 18 * 26.56}]}


def test_every_rule_has_a_case():
    assert {r.id for r in rules.RULES} == set(CASES)
    assert len({r.id for r in rules.RULES}) == len(rules.RULES)


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires_on_its_case_and_not_otherwise(rule_id):
    rule = rules.by_id(rule_id)
    fire, silent = CASES[rule_id]
    got = rule.run(fire())
    assert got is not None, f"{rule_id} did not fire"
    assert got.severity in ("error", "warn", "info") and got.evidence and got.fix
    assert rule.run(silent()) is None, f"{rule_id} fired on its silent case"


def test_rules_have_sources_for_known_issues():
    for rid, num in [("cumem-masked-import", "1749"), ("cumem-masked-import", "1948"),
                     ("nvls-permuted-allgather", "1906"), ("ring-hang-masked-nvswitch", "61073")]:
        assert any(num in s for s in rules.by_id(rid).sources)


def test_cumem_rule_respects_version_and_default():
    assert rules.by_id("cumem-masked-import").run(make_facts(cvd="3", nccl="2.18.3")) is None  # off by default
    assert rules.by_id("cumem-masked-import").run(make_facts(cvd="3", nccl="2.18.3",
                                                             env={"NCCL_CUMEM_ENABLE": "1"}))
    assert rules.by_id("cumem-masked-import").run(make_facts(cvd=None)) is None  # not masked
    assert rules.by_id("cumem-masked-import").run(make_facts(cvd="3", nccl=None)) is None  # no NCCL


def test_ring_rule_algo_forms():
    ring = rules.by_id("ring-hang-masked-nvswitch")
    assert ring.run(make_facts(cvd="5"))  # NCCL_ALGO unset
    assert ring.run(make_facts(cvd="5", env={"NCCL_ALGO": "^Ring"})) is None
    assert ring.run(make_facts(cvd="5", env={"NCCL_ALGO": "allreduce:tree;broadcast:ring"})) is None
    assert ring.run(make_facts(cvd="5", env={"NCCL_ALGO": "broadcast:tree"}))
    assert ring.run(make_facts(cvd="5", topology="pcie", fabric=None)) is None  # no NVLink
    assert ring.run(make_facts(cvd="1", n=2)).severity == "info"  # 2 GPUs: no hang measured


def test_nvls_rule_needs_nvswitch_and_nvls():
    nv = rules.by_id("nvls-permuted-allgather")
    assert nv.run(make_facts(cvd="1,0", env={"NCCL_NVLS_ENABLE": "0"})) is None
    assert nv.run(make_facts(cvd="1,0", env={"NCCL_ALGO": "Ring,Tree"})) is None
    assert nv.run(make_facts(cvd="1,0", topology="pairs", fabric=None)) is None
    assert nv.run(make_facts(cvd="0,1")) is None


def test_env_mismatch_names_the_odd_rank():
    g = actor_group(3, env_for=lambda r: {"NCCL_ALGO": "Tree"} if r != 1 else {})
    got = rules.by_id("nccl-env-mismatch").run(g)
    assert got.ranks == [1] and "NCCL_ALGO" in got.evidence and got.severity == "error"
    g = actor_group(3, env_for=lambda r: {"NCCL_DEBUG": "INFO"} if r == 2 else {})
    got = rules.by_id("nccl-env-mismatch").run(g)
    assert got.ranks == [2] and got.severity == "warn"
    # 1 against 1: no majority says which rank is wrong, so both are named.
    g = actor_group(2, env_for=lambda r: {"NCCL_ALGO": "Ring"} if r == 1 else {})
    got = rules.by_id("nccl-env-mismatch").run(g)
    assert got.ranks == [0, 1] and "'Ring' on ranks 1" in got.evidence


def test_one_gpu_container_counts_as_masked_in_a_group():
    g = make_group([make_facts(cvd=None, n=1, host="node-a") for _ in range(4)])
    assert rules.by_id("ring-hang-masked-nvswitch").run(g["ranks"][0]) is None
    group.mark_one_gpu_views(g["ranks"], g["nodes"])
    got = rules.by_id("ring-hang-masked-nvswitch").run(g["ranks"][0])
    assert got and "container" in got.evidence and got.severity == "warn"
    assert rules.by_id("cvd-order-ambiguous").run(g["ranks"][0]) is None


def test_group_merges_local_findings_per_rule():
    g = actor_group(4)
    found = {x.rule: x for x in rules.evaluate_group(g)}
    assert found["cumem-masked-import"].ranks == [0, 1, 2, 3]
    assert found["ring-hang-masked-nvswitch"].ranks == [0, 1, 2, 3]


# ---------------------------------------------------------------- facts
def test_map_visible():
    gpus = nvml.query(FakeNvml(8))["gpus"]
    v = facts.map_visible("3", gpus)
    assert v["physical"] == [3] and v["masked"] and not v["permuted"]
    v = facts.map_visible("1,2,3,4,5,6,7,0", gpus)
    assert v["physical"] == [1, 2, 3, 4, 5, 6, 7, 0] and v["permuted"] and not v["masked"]
    v = facts.map_visible(None, gpus)
    assert v["physical"] == list(range(8)) and not v["masked"]
    v = facts.map_visible("GPU-00000005", gpus)  # UUID prefix
    assert v["physical"] == [5]
    v = facts.map_visible("2,42,1", gpus)  # CUDA stops at the first bad entry
    assert v["physical"] == [2] and v["invalid"] == "42" and v["ignored"] == ["1"]
    v = facts.map_visible("", gpus)
    assert v["physical"] == [] and v["masked"]


def test_nvml_query_topologies():
    q = nvml.query(FakeNvml(4, "nvswitch"))
    assert q["nvswitch"] and q["links"]["0,1"]["type"] == "NV18" and q["gpus"][0]["nvswitch_links"] == 18
    q = nvml.query(FakeNvml(8, "pairs", fabric=None))
    assert not q["nvswitch"] and q["links"]["0,1"]["type"] == "NV4" and q["links"]["0,2"]["type"] == "NODE"
    assert q["links"]["1,5"]["type"] == "SYS" and q["gpus"][0]["nvlink_peers"] == {"1": 4}


def test_nvml_missing_library():
    q = nvml.query(None) if not os.path.exists("/dev/nvidiactl") else None
    if q is not None:
        assert q["available"] is False and q["error"]


def test_nccl_version_string():
    assert facts.nccl_version_string(22809) == "2.28.9"
    assert facts.nccl_version_string(2708) == "2.7.8"


def test_report_text_and_exit_status():
    g = actor_group(3, env_for=lambda r: {"NCCL_PROTO": "Simple"} if r == 2 else {})
    rep = report.build("group", rules.evaluate_group(g), g)
    assert rep["exit_status"] == 1 and rep["findings"][0]["severity"] == "error"
    text = report.render(rep)
    assert text.index("ERROR") < text.index("WARN") < text.index("Facts")
    assert "NCCL_PROTO" in text and "fix" in text
    json.dumps(rep)


# ---------------------------------------------------------------- local mode, as a user runs it
def _cli(*args, env=None):
    """`python -m actorcc.doctor ARGS` (through the bare package where the extension is missing)."""
    path = os.pathsep.join(p for p in (str(Path(PKG_DIR).parent), os.environ.get("PYTHONPATH")) if p)
    e = dict(os.environ, PYTHONPATH=path, **(env or {}))
    cmd = [sys.executable, "-m", "actorcc.doctor"] if EXTENSION else [
        sys.executable, "-c", _BARE.format(path=PKG_DIR) + "runpy.run_module('actorcc.doctor', run_name='__main__')"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=e, timeout=120)


def test_local_mode_json_on_this_machine():
    p = _cli("--json")
    assert p.returncode in (0, 1), p.stderr
    rep = json.loads(p.stdout)
    assert rep["mode"] == "local" and rep["exit_status"] == p.returncode
    f = rep["facts"]
    for key in ("host", "nvml", "visible", "env", "nccl", "vmm", "ib_devices"):
        assert key in f
    assert f["vmm"]["status"] in ("ok", "failed", "skipped", "not-built")


def test_local_mode_text_flags_env_and_gates():
    p = _cli(env={"NCCL_P2P_DISABLE": "1"})
    assert "p2p-disabled" in p.stdout and "Facts" in p.stdout and "NCCL_P2P_DISABLE=1" in p.stdout
    assert p.returncode == 0
    assert _cli("--fail-on", "warn", env={"NCCL_P2P_DISABLE": "1"}).returncode == 1


def test_saved_facts_with_an_error_exit_1(tmp_path):
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(make_facts(cvd="1,0", nccl="2.26.2")))
    p = _cli("--facts", str(path))
    assert p.returncode == 1 and "nvls-permuted-allgather" in p.stdout
    path.write_text(json.dumps(actor_group(2)))
    p = _cli("--facts", str(path), "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["mode"] == "group"


def test_local_report_names_the_nccl_library(tmp_path):
    # a process that preloads a library carrying actorcc's ELF note: the facts and the text say
    # it is actorcc's, in which version, and how it got there
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler")
    src = tmp_path / "standin.c"
    src.write_text('#include <stdint.h>\n__attribute__((section(".note.actorcc"), used, aligned(4))) static const '
                   'struct { uint32_t a, b, c; char n[8]; char d[8]; } note = {8, 8, 1, "actorcc", "0.1.0"};\n'
                   'int ncclGetVersion(int* v) { *v = 22905; return 0; }\n')
    lib = tmp_path / "libnccl.so.2"
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libnccl.so.2", str(src), "-o", str(lib)], check=True,
                   timeout=60)
    p = _cli("--json", "--no-vmm", env={"LD_PRELOAD": str(lib)})
    abi = json.loads(p.stdout)["facts"]["nccl"]["abi"]
    assert (abi["provider"], abi["version"], abi["how"], abi["path"]) == ("actorcc", "2.29.5", "loaded", str(lib))
    assert json.loads(p.stdout)["facts"]["nccl"]["version"] == "2.29.5"
    p = _cli("--no-vmm", env={"LD_PRELOAD": str(lib)})
    assert f"actorcc's NCCL 2.29.5 ({lib}, loaded)" in p.stdout
    # without it: whatever the machine has, never actorcc's
    p = _cli("--json", "--no-vmm")
    assert json.loads(p.stdout)["facts"]["nccl"]["abi"].get("provider") != "actorcc"


def test_vmm_probe_binary_if_built():
    exe = facts.find_vmm_probe()
    if exe is None:
        pytest.skip("actorcc-vmm-probe not built")
    r = facts.vmm_facts({"physical": []}, [], exe=exe)
    assert r["status"] in ("ok", "skipped", "failed")
    if facts.missing_driver():
        assert r["status"] == "skipped" and r["detail"].startswith("no NVIDIA driver found"), r
        assert "insufficient" not in r["detail"]


def test_no_driver_is_named_not_insufficient(tmp_path):
    # Without libcuda the probe's CUDA runtime says "CUDA driver version is insufficient";
    # the doctor must say that no driver exists, and not run the probe at all.
    probe = tmp_path / "probe"
    ran = tmp_path / "ran"
    probe.write_text(f"#!/bin/sh\ntouch {ran}\necho '{{\"status\":\"skipped\",\"detail\":\"no GPU: CUDA driver "
                     "version is insufficient for CUDA runtime version\"}'\nexit 2\n")
    probe.chmod(0o755)
    r = facts.vmm_facts({"physical": []}, [], exe=str(probe), driver_lib="libcuda-absent.so.1")
    assert r["status"] == "skipped" and not ran.exists(), r
    assert r["detail"].startswith("no NVIDIA driver found (libcuda-absent.so.1 cannot be loaded"), r
    f = make_facts()
    f["vmm"] = r
    rep = report.build("local", rules.evaluate_local(f), f)
    text = report.render(rep)
    assert "no NVIDIA driver found" in text and "insufficient" not in text
    if facts.missing_driver() is None:  # a driver here: the probe runs
        assert facts.vmm_facts({"physical": []}, [], exe=str(probe))["status"] == "skipped" and ran.exists()


# ---------------------------------------------------------------- group mode, real ranks (CPU)
def _extension():
    try:
        import actorcc
        return actorcc if hasattr(actorcc, "Communicator") else None
    except ImportError:
        return None


def _rank_main(uid_text, rank, world, env, q):
    os.environ.update(env)
    try:
        from actorcc.doctor import group as g
        comm = g.make_communicator(rank, world, uid=uid_text)
        q.put((rank, g.run(comm, sizes=(1 << 16,), vmm=False)))
    except Exception as e:  # noqa: BLE001
        q.put((rank, {"error": repr(e)}))


def test_group_mode_flags_the_rank_with_a_different_nccl_setting():
    if _extension() is None:
        pytest.skip("actorcc extension not built (actorcc.Communicator missing)")
    world = 3
    uid = group.create_unique_id()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(str(uid), r, world,
                                                   {"NCCL_ALGO": "Ring" if r == 1 else "Tree"}, q))
             for r in range(world)]
    for p in procs:
        p.start()
    out = dict(q.get(timeout=150) for _ in range(world))
    for p in procs:
        p.join(timeout=30)
    for r in range(world):
        assert "error" not in out[r], out[r]
    rep = out[0]
    assert rep["mode"] == "group" and len(rep["facts"]["ranks"]) == world
    found = {f["rule"]: f for f in rep["findings"]}
    assert found["nccl-env-mismatch"]["ranks"] == [1]
    assert "NCCL_ALGO" in found["nccl-env-mismatch"]["evidence"]
    assert rep["exit_status"] == 1  # NCCL_ALGO must match on all ranks
    assert [f["rule"] for f in out[2]["findings"]] == [f["rule"] for f in rep["findings"]]
    assert len(rep["facts"]["measure"]["first_collective_s"]) == world
    assert rep["facts"]["measure"]["bandwidth"], rep["facts"]["measure"]


@pytest.mark.ray
def test_ray_doctor_runs_in_each_actor():
    ray = pytest.importorskip("ray")
    if _extension() is None:
        pytest.skip("actorcc extension not built (actorcc.Communicator missing)")
    from actorcc.doctor import ray_hook
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        @ray.remote(num_cpus=0)
        class Actor:
            def pid(self):
                return os.getpid()

        actors = [Actor.remote(), Actor.options(runtime_env={"env_vars": {"NCCL_P2P_DISABLE": "1"}}).remote()]
        pids = ray.get([a.pid.remote() for a in actors])
        rep = ray_hook.doctor(actors, sizes=(1 << 16,), vmm=False, timeout=240)
    finally:
        ray.shutdown()
    assert [f["host"]["pid"] for f in rep["facts"]["ranks"]] == pids  # facts come from the actors
    assert str(rep) == report.render(rep) and str(rep).startswith("actorcc-doctor (group, 2 ranks"), str(rep)
    found = {f["rule"]: f for f in rep["findings"]}
    assert "NCCL_P2P_DISABLE" in found["nccl-env-mismatch"]["evidence"]
    assert found["nccl-env-mismatch"]["severity"] == "error"
    assert found["p2p-disabled"]["ranks"] == [1]


# ---------------------------------------------------------------- the ctypes NVML binding
FAKE_NVML_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
typedef struct { char busIdLegacy[16]; unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
                 char busId[32]; } pci_t;                                   /* nvmlPciInfo_t */
typedef struct { unsigned version; unsigned char clusterUuid[16]; int status; unsigned cliqueId;
                 unsigned char state; unsigned healthMask; } fabric_v2_t;   /* nvmlGpuFabricInfo_v2_t */
static int idx(void* h) { return (int)(intptr_t)h - 1; }
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char* nvmlErrorString(int r) { return r == 3 ? "Not Supported" : "Unknown Error"; }
int nvmlSystemGetDriverVersion(char* b, unsigned n) { snprintf(b, n, "580.159.04"); return 0; }
int nvmlSystemGetCudaDriverVersion(int* v) { *v = 13000; return 0; }
int nvmlDeviceGetCount_v2(unsigned* n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** h) { if (i > 1) return 2; *h = (void*)(intptr_t)(i + 1); return 0; }
int nvmlDeviceGetName(void* h, char* b, unsigned n) { snprintf(b, n, "NVIDIA H200"); return 0; }
int nvmlDeviceGetUUID(void* h, char* b, unsigned n) { snprintf(b, n, "GPU-%08d-fake", idx(h)); return 0; }
int nvmlDeviceGetPciInfo_v3(void* h, pci_t* p) { memset(p, 0, sizeof *p);
  snprintf(p->busId, 32, "00000000:%02X:00.0", 0x18 + 0x10 * idx(h)); return 0; }
int nvmlDeviceGetNvLinkState(void* h, unsigned l, unsigned* a) { *a = 1; return 0; }
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* h, unsigned l, pci_t* p) { memset(p, 0, sizeof *p);
  snprintf(p->busId, 32, "00000000:%02X:00.0", 0xA0 + l % 4); return 0; }
int nvmlDeviceGetNvLinkRemoteDeviceType(void* h, unsigned l, int* t) { *t = 2; return 0; }
int nvmlDeviceGetTopologyCommonAncestor(void* a, void* b, int* lvl) { *lvl = 40; return 0; }
int nvmlDeviceGetP2PStatus(void* a, void* b, int i, int* s) { *s = i == 2 ? 0 : 3; return 0; }
int nvmlDeviceGetGpuFabricInfoV(void* h, fabric_v2_t* f) {
  if (f->version != (sizeof(fabric_v2_t) | (2u << 24))) return 25;  /* ARGUMENT_VERSION_MISMATCH */
  memset(f->clusterUuid, 0xab, 16); f->status = 0; f->cliqueId = 7; f->state = 3; return 0; }
"""


def test_ctypes_nvml_against_a_fake_library(tmp_path):
    cc = next((c for c in ("cc", "gcc", "clang") if subprocess.run(["which", c], capture_output=True).returncode == 0),
              None)
    if cc is None:
        pytest.skip("no C compiler")
    src, lib = tmp_path / "fake_nvml.c", tmp_path / "libfake-nvml.so"
    src.write_text(FAKE_NVML_C)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    nv = nvml.Nvml(str(lib))
    q = nvml.query(nv)
    assert q["available"] and q["error"] is None
    assert q["driver_version"] == "580.159.04" and q["cuda_driver_version"] == "13.0"
    g0, g1 = q["gpus"]
    assert g0["name"] == "NVIDIA H200" and g1["uuid"] == "GPU-00000001-fake"
    assert g0["pci_bus_id"] == "0000:18:00.0" and g1["pci_bus_id"] == "0000:28:00.0"
    assert g0["nvlinks_active"] == 18 and g0["nvswitch_links"] == 18
    assert g0["fabric"] == {"state": "completed", "status": 0, "clique_id": 7, "cluster_uuid": "ab" * 16}
    assert q["nvswitch"] and q["links"]["0,1"] == {"type": "NV18", "via": "nvswitch", "nvlinks": 18}
    v = facts.map_visible("GPU-00000001", q["gpus"])
    assert v["physical"] == [1] and v["masked"]
    with pytest.raises(nvml.NvmlError, match="not in this driver"):
        nv._call("nvmlDeviceGetMissingThing")


# ---------------------------------------------------------------- group choreography, in threads
class _Hub:
    def __init__(self, n):
        import threading
        self.n, self.barrier, self.slots = n, threading.Barrier(n, timeout=60), [None] * n

    def exchange(self, rank, value):
        self.slots[rank] = value
        self.barrier.wait()
        out = list(self.slots)
        self.barrier.wait()
        return out


class FakeComm:
    """In-process stand-in for actorcc.Communicator (threads as ranks) for multi-node layouts
    the CPU backend refuses."""
    backend, device = "cpu", -1
    hubs: dict = {}

    def __init__(self, uid, rank, world):
        self.hub = FakeComm.hubs.setdefault(uid, _Hub(world))
        self.rank, self.world_size = rank, world

    def allgather_bytes(self, blob):
        return self.hub.exchange(self.rank, bytes(blob))

    def all_reduce(self, x):
        x[:] = sum(self.hub.exchange(self.rank, x.copy()))

    def host_barrier(self):
        self.hub.barrier.wait()

    def close(self):
        pass


def test_group_collect_on_two_nodes_with_fake_ranks(monkeypatch):
    import itertools
    import threading
    pytest.importorskip("numpy")
    local = threading.local()
    per_rank = {r: make_facts(cvd=str(r % 2), host=f"node-{r // 2}", ib=["mlx5_0"],
                              env={"NCCL_IB_DISABLE": "1"} if r == 3 else {}) for r in range(4)}
    counter = itertools.count()
    monkeypatch.setattr(group.facts_mod, "collect_local", lambda **kw: copy.deepcopy(per_rank[local.rank]))
    monkeypatch.setattr(group.facts_mod, "vmm_facts", lambda v, g: {"status": "ok", "detail": f"node of rank {local.rank}"})
    monkeypatch.setattr(group, "create_unique_id", lambda: f"uid-{next(counter)}")
    monkeypatch.setattr(group, "make_communicator", lambda rank, world, uid=None, address=None: FakeComm(uid, rank, world))
    out = {}

    def rank_main(r):
        local.rank = r
        out[r] = group.run(FakeComm("world", r, 4), sizes=(1 << 12, 1 << 16))

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(out) == [0, 1, 2, 3]
    g = out[0]["facts"]
    assert [n["ranks"] for n in g["nodes"]] == [[0, 1], [2, 3]]
    assert [f["local_rank"] for f in g["ranks"]] == [0, 1, 0, 1]
    assert [f["vmm"]["detail"] for f in g["ranks"]] == ["node of rank 0"] * 2 + ["node of rank 2"] * 2
    scopes = {(b["scope"], b["bytes"]) for b in g["measure"]["bandwidth"]}
    assert scopes == {("node 0 node-0 (2 ranks)", 1 << 12), ("node 0 node-0 (2 ranks)", 1 << 16),
                      ("node 1 node-1 (2 ranks)", 1 << 12), ("node 1 node-1 (2 ranks)", 1 << 16),
                      ("all 4 ranks, 2 nodes", 1 << 16)}
    found = {f["rule"]: f for f in out[0]["findings"]}
    assert found["ib-disabled-multinode"]["ranks"] == [3]
    assert out[3]["findings"] == out[0]["findings"]


def test_package_is_callable_and_local_report_is_json():
    import actorcc.doctor as doctor_pkg
    rep = doctor_pkg(vmm=False)  # no communicator: the local report
    assert rep["mode"] == "local" and rep["facts"]["vmm"]["status"] == "not-run"
    json.dumps(rep)
    assert "Facts" in doctor_pkg.render(rep)


def test_cli_group_missing_rank_is_a_finding_within_join_timeout():
    # Without --join-timeout a missing rank kept the doctor silent for the library's 600 s,
    # then ended in a traceback. Now: a finding naming the missing rank, exit status 1.
    if _extension() is None:
        pytest.skip("the actorcc extension is not built")
    import time
    uid = str(_extension().UniqueId.create("127.0.0.1"))
    t0 = time.monotonic()
    p = _cli("--uid", uid, "--rank", "0", "--world", "3", "--join-timeout", "2", "--no-vmm", "--no-bandwidth")
    took = time.monotonic() - t0
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert took < 30, took
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    assert "waiting up to 2 s" in p.stderr, p.stderr
    assert "ERROR  group-join-failed" in p.stdout and "ranks 1, 2 of 3 did not join within 2 s" in p.stdout, p.stdout
    # a rank whose root is not up: the same finding, naming the root it could not reach
    p = _cli("--uid", uid, "--rank", "1", "--world", "3", "--join-timeout", "1", "--no-vmm", "--json")
    rep = json.loads(p.stdout)
    assert p.returncode == 1 and rep["findings"][0]["rule"] == "group-join-failed", rep["findings"]
    assert rep["findings"][0]["ranks"] == [1] and "could not connect" in rep["findings"][0]["evidence"]
    p = _cli("--uid", uid, "--rank", "1", "--world", "3", "--join-timeout", "0")
    assert p.returncode == 2 and "--join-timeout must be > 0" in p.stderr


# ---------------------------------------------------------------- group mode from launcher variables
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE")


def _clean_env(**extra):
    env = {k: "" for k in LAUNCHER_VARS}  # _cli merges into os.environ: blank what CI may have set
    env.update(extra)
    return env


def test_cli_group_flags_without_a_rendezvous_are_refused_naming_what_to_add():
    # `--rank 0 --world 2` alone used to run local mode silently.
    p = _cli("--rank", "0", "--world", "2", "--no-vmm", env=_clean_env())
    assert p.returncode == 2, (p.stdout, p.stderr)
    for needed in ("MASTER_ADDR", "MASTER_PORT", "--address HOST:PORT", "--uid create"):
        assert needed in p.stderr, p.stderr
    assert "missing: MASTER_ADDR, MASTER_PORT" in p.stderr, p.stderr
    assert "Facts" not in p.stdout  # no local report passed off as the group's
    p = _cli("--rank", "2", "--world", "2", env=_clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT="1"))
    assert p.returncode == 2 and "rank 2 is not in a group of 2" in p.stderr, p.stderr


def test_launcher_resolve_flags_win_over_variables():
    from actorcc.doctor import launcher
    env = {"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    assert launcher.resolve(None, None, env) == {"rank": 1, "world": 4, "host": "10.0.0.1", "port": 29500,
                                                 "via_store": False}
    assert launcher.resolve(3, None, dict(env, TORCHELASTIC_USE_AGENT_STORE="True"))["rank"] == 3
    with pytest.raises(launcher.Refusal, match="missing: --world or WORLD_SIZE, MASTER_PORT"):
        launcher.resolve(0, None, {"MASTER_ADDR": "h"})


def test_cli_group_mode_from_launcher_variables_two_ranks():
    # Two processes with only RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set, no flag: rank 0 hosts
    # the group on MASTER_ADDR:MASTER_PORT (loopback), both report the group of 2.
    if _extension() is None:
        pytest.skip("the actorcc extension is not built")
    from conftest import free_port
    port = str(free_port())
    path = os.pathsep.join(p for p in (str(Path(PKG_DIR).parent), os.environ.get("PYTHONPATH")) if p)
    procs = []
    for r in range(2):
        env = dict(os.environ, PYTHONPATH=path, **_clean_env(RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                                               MASTER_PORT=port))
        procs.append(subprocess.Popen([sys.executable, "-m", "actorcc.doctor", "--no-vmm", "--bw-sizes", "64K",
                                       "--join-timeout", "60"], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=120))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    (out0, err0), (out1, err1) = outs
    assert "actorcc-doctor (group, 2 ranks on 1 node(s))" in out0, (out0, err0)
    assert "group from RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT" in err0 and f"127.0.0.1:{port}" in err0, err0
    assert "actorcc-doctor rank 1:" in out1 and "full report on rank 0" in out1, (out1, err1)
    assert "Traceback" not in err0 + err1, err0 + err1


def test_report_prints_as_the_cli_text():
    rep = report.build("local", rules.evaluate_local(make_facts()), make_facts())
    assert str(rep) == report.render(rep) == repr(rep)
    assert rep["mode"] == "local" and isinstance(rep, dict)  # existing callers index it
    assert json.loads(json.dumps(rep))["summary"] == rep["summary"]


def test_cli_group_mode_under_torchrun_needs_no_flag():
    # torchrun's MASTER_PORT is its own store's: rank 0 hands a UniqueId over through that store.
    if _extension() is None:
        pytest.skip("the actorcc extension is not built")
    import importlib.util
    if importlib.util.find_spec("torch") is None:  # not imported here: the doctor's NCCL probe ran in this process
        pytest.skip("torch (torchrun) not installed")
    env = dict(os.environ, **_clean_env())
    for k in LAUNCHER_VARS:
        env.pop(k)
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "actorcc.doctor",
                        "--no-vmm", "--no-bandwidth", "--join-timeout", "60"], env=env, capture_output=True, text=True,
                       timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("actorcc-doctor (group, 2 ranks on 1 node(s))") == 1, p.stdout
    assert "actorcc-doctor rank 1:" in p.stdout and "full report on rank 0" in p.stdout, p.stdout
    assert p.stderr.count("joining through the id rank 0 puts in torchrun's store") == 2, p.stderr
