"""`python -m actorcc.nccl --check` under torch 2.15 with actorcc's library
preloaded reported NVIDIA's NCCL, "two NCCL libraries are mapped" and a VLLM_NCCL_SO_PATH
mismatch, while the loader bound every nccl* call of libtorch_cuda.so to actorcc's library: torch's
start-up maps NVIDIA's wheel copy by path beside it, and the check took the first libnccl in
/proc/self/maps. Now it reports the library each loaded caller's calls reach.

On CPU: actorcc's real libnccl.so.2 (preloaded, or not), a stand-in for NVIDIA's (a libnccl.so.2
whose ncclGetVersion returns 23007, loaded by path with ctypes after the preload, as torch's
start-up does) and a stand-in for torch's caller (a libtorch_cuda.so linked against
libnccl.so.2 whose caller_version() calls ncclGetVersion: the ground truth of where its calls go).
Skipped without a C compiler or without actorcc's library."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "python" / "actorcc" / "nccl.py"
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
NV_MARK = 23007  # the stand-in's ncclGetVersion: "2.30.7"


def _actorcc_lib():
    """actorcc's libnccl.so.2: ACTORCC_NCCL_ABI_LIB, else the installed package's."""
    if os.environ.get("ACTORCC_NCCL_ABI_LIB"):
        return Path(os.environ["ACTORCC_NCCL_ABI_LIB"]).resolve()
    spec = importlib.util.find_spec("actorcc")
    if spec is None or not spec.origin:
        return None
    p = Path(spec.origin).resolve().parent / "lib" / "libnccl.so.2"
    return p if p.is_file() else None


LIB = _actorcc_lib()
pytestmark = [pytest.mark.skipif(CC is None, reason="needs a C compiler"),
              pytest.mark.skipif(LIB is None or not LIB.is_file(), reason="actorcc's libnccl.so.2 is not installed")]


@pytest.fixture(scope="module")
def stand(tmp_path_factory):
    d = tmp_path_factory.mktemp("nccl-check")
    nv = d / "nv"
    nv.mkdir()
    (d / "nv.c").write_text(f"int ncclGetVersion(int* v) {{ *v = {NV_MARK}; return 0; }}\n")
    (d / "caller.c").write_text("int ncclGetVersion(int*);\n"
                                "int caller_version(void) { int v = 0; ncclGetVersion(&v); return v; }\n")

    def cc(*args):
        subprocess.run([CC, *map(str, args)], cwd=d, check=True, capture_output=True, timeout=120)
    cc("-shared", "-fPIC", "-Wl,-soname,libnccl.so.2", "nv.c", "-o", nv / "libnccl.so.2")
    # linked as libtorch_cuda.so is: DT_NEEDED libnccl.so.2, found through its RUNPATH
    cc("-shared", "-fPIC", "caller.c", "-o", d / "libtorch_cuda.so", "-Wl,--no-as-needed", f"-L{nv}",
       "-l:libnccl.so.2", f"-Wl,-rpath,{nv}")
    return {"nv": nv / "libnccl.so.2", "caller": d / "libtorch_cuda.so"}


SCRIPT = r"""
import ctypes, importlib.util, json, os, sys
ctypes.CDLL({nv!r}, mode=os.{mode})          # NVIDIA's copy by path, as torch's start-up loads it
if {vllm_opens}:
    ctypes.CDLL(os.environ["VLLM_NCCL_SO_PATH"])  # vLLM's PyNccl handle
caller = ctypes.CDLL({caller!r})                # torch's CUDA library, linked against libnccl.so.2
truth = caller.caller_version()
s = importlib.util.spec_from_file_location("n", {src!r}); m = importlib.util.module_from_spec(s)
s.loader.exec_module(m)
print(json.dumps({{"truth": truth, "check": m.check()}}))
m.main(["--check"])
"""


def _run(stand, preload, mode="RTLD_LOCAL", vllm=None, vllm_opens=False):
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "ACTORCC_NCCL_ABI_LIB", "VLLM_NCCL_SO_PATH")}
    if preload:
        env["LD_PRELOAD"] = str(LIB)
    if vllm:
        env["VLLM_NCCL_SO_PATH"] = str(vllm)
    code = SCRIPT.format(nv=str(stand["nv"]), mode=mode, caller=str(stand["caller"]), src=str(SRC),
                         vllm_opens=vllm_opens)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    first, _, cli = p.stdout.partition("\n")
    out = json.loads(first)
    return out["truth"], out["check"], cli.strip(), p.stderr


def _version(code):
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


@pytest.mark.parametrize("mode", ["RTLD_LOCAL", "RTLD_GLOBAL"])
def test_preloaded_library_takes_the_callers_calls_beside_a_copy_loaded_by_path(stand, mode):
    truth, c, cli, err = _run(stand, preload=True, mode=mode, vllm=LIB)
    assert truth != NV_MARK, "the loader bound the caller to the copy loaded by path"
    lib, nv = str(LIB.resolve()), str(stand["nv"].resolve())
    assert (c["how"], c["provider"], c["path"], c["version"]) == ("bound", "actorcc", lib, _version(truth)), c
    torch_caller = [x for x in c["callers"] if x["caller"] == "torch"]
    assert [(x["object"], x["reaches"], x["provider"]) for x in torch_caller] == [
        (str(stand["caller"]), lib, "actorcc")], c["callers"]
    vllm = [x for x in c["callers"] if x["caller"] == "vllm"]
    assert [(x["reaches"], x["loaded"]) for x in vllm] == [(lib, True)], c["callers"]
    assert {os.path.realpath(m) for m in c["mapped"]} == {lib, nv}, c["mapped"]
    assert c["unused"] == [nv] and c["warnings"] == [], c
    assert any("only mapped, not used" in n and nv in n and "no problem" in n for n in c["notes"]), c["notes"]
    assert cli.startswith(f"actorcc's NCCL {_version(truth)} ({lib}, bound)"), cli
    assert "the calls of torch and vllm reach it" in cli and f"only mapped, not used: {nv}" in cli, cli
    assert "warning:" not in err and "note:" in err, err


def test_without_the_preload_the_caller_reaches_the_copy_it_is_linked_to(stand):
    truth, c, cli, err = _run(stand, preload=False, vllm=LIB)
    nv = str(stand["nv"].resolve())
    assert truth == NV_MARK
    assert (c["how"], c["provider"], c["path"], c["version"]) == ("bound", "nvidia", nv, "2.30.7"), c
    assert [(x["caller"], x["reaches"]) for x in c["callers"]] == [("torch", nv), ("vllm", None)], c["callers"]
    # vLLM would open actorcc's by path while torch calls NVIDIA's: a real problem, said so
    assert any(w.startswith("VLLM_NCCL_SO_PATH names actorcc's NCCL") and f"torch reaches nvidia's ({nv})" in w
               for w in c["warnings"]), c["warnings"]
    assert "warning: VLLM_NCCL_SO_PATH" in err, err


def test_callers_that_reach_different_libraries_are_a_problem(stand):
    """vLLM's handle of NVIDIA's copy (opened by path) beside torch's calls bound to the preload."""
    truth, c, cli, err = _run(stand, preload=True, vllm=stand["nv"], vllm_opens=True)
    lib, nv = str(LIB.resolve()), str(stand["nv"].resolve())
    assert truth != NV_MARK
    assert [(x["caller"], x["reaches"]) for x in c["callers"]] == [("torch", lib), ("vllm", nv)], c["callers"]
    assert any(w.startswith("the callers of NCCL in this process reach different libraries") for w in c["warnings"])
    assert any("VLLM_NCCL_SO_PATH names nvidia's NCCL" in w and f"torch reaches actorcc's ({lib})" in w
               for w in c["warnings"]), c["warnings"]
    assert c["unused"] == [] and c["notes"] == [], c
