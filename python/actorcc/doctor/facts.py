"""What one process can learn about itself and its host: plain JSON facts for the rules.

collect_local() gathers: host identity, the GPUs (NVML), how CUDA_VISIBLE_DEVICES maps to
them, the NCCL libraries that would be loaded and their versions, the NCCL_* environment,
InfiniBand devices, and the VMM POSIX-fd sharing probe. Each part is a small function that
the tests can call on synthetic input.
"""
from __future__ import annotations

import ctypes
import glob
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from .. import nccl as nccl_abi
from . import nvml as nvml_mod

SCHEMA = 1
ENV_PREFIXES = ("NCCL_",)
ENV_OTHER = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
             "TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING")


# ---------------------------------------------------------------- host and environment
def host_facts() -> dict:
    boot_id = ""
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        pass
    name = socket.gethostname()
    return {"hostname": name, "host_id": os.environ.get("ACTORCC_NODE_ID") or f"{name}/{boot_id}",
            "pid": os.getpid(), "python": platform.python_version(), "platform": platform.platform()}


def env_facts(environ=None) -> dict:
    environ = os.environ if environ is None else environ
    nccl = {k: v for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES)}
    other = {k: environ[k] for k in ENV_OTHER if k in environ}
    return {"nccl": nccl, "other": other}


def ib_devices() -> list[str]:
    return sorted(os.path.basename(p) for p in glob.glob("/sys/class/infiniband/*"))


# ---------------------------------------------------------------- CUDA_VISIBLE_DEVICES
def map_visible(value: str | None, gpus: list[dict] | None, device_order: str | None = None) -> dict:
    """Maps CUDA_VISIBLE_DEVICES onto the host's GPUs (NVML order = PCI order).

    Follows CUDA: entries are indices or (prefixes of) UUIDs; enumeration stops at the first
    entry that names no GPU (or repeats one), the rest is ignored. masked = fewer GPUs visible
    than the host has; permuted = the visible GPUs are not in ascending physical order.
    """
    out = {"env": value, "physical": [], "uuids": [], "invalid": None, "ignored": [],
           "host_gpus": len(gpus) if gpus is not None else None, "masked": None, "permuted": False,
           "note": None}
    if gpus is None:  # no NVML: only the text is known
        out["masked"] = None if value is None else True if value.strip() else None
        return out
    if value is None:
        out["physical"] = [g["index"] for g in gpus]
    else:
        entries = [e.strip() for e in value.split(",")] if value.strip() else []
        for k, e in enumerate(entries):
            idx = _resolve_entry(e, gpus)
            if idx is None or idx in out["physical"]:
                out["invalid"], out["ignored"] = e, entries[k + 1:]
                break
            out["physical"].append(idx)
    out["uuids"] = [gpus[i]["uuid"] for i in out["physical"]]
    out["masked"] = len(out["physical"]) < len(gpus)
    out["permuted"] = out["physical"] != sorted(out["physical"])
    names = {g.get("name") for g in gpus}
    if value and len(names) > 1 and (device_order or "FASTEST_FIRST") != "PCI_BUS_ID":
        out["note"] = ("mixed GPU models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA numbers "
                       "the fastest GPU first, so index entries may name other GPUs than shown")
    return out


def _resolve_entry(entry: str, gpus: list[dict]) -> int | None:
    if entry.isdigit():
        i = int(entry)
        return i if i < len(gpus) else None
    if entry.upper().startswith("GPU-"):
        hits = [g["index"] for g in gpus if (g.get("uuid") or "").lower().startswith(entry.lower())]
        return hits[0] if len(hits) == 1 else None
    return None  # MIG-... and anything else: not a whole GPU the doctor can place


# ---------------------------------------------------------------- NCCL
def nccl_version_string(code: int) -> str:
    if code >= 10000:  # NCCL >= 2.9: major*10000 + minor*100 + patch
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _probe_here(name_or_path: str) -> dict:
    """probe_nccl_library's work, in this process (the child's side of it)."""
    try:
        lib = ctypes.CDLL(name_or_path, mode=getattr(os, "RTLD_LOCAL", 0))
        code = ctypes.c_int(0)
        if lib.ncclGetVersion(ctypes.byref(code)) != 0:
            return {"path": name_or_path, "version": None, "error": "ncclGetVersion failed"}
        path = name_or_path
        info = _DlInfo()
        libc = ctypes.CDLL(None)
        if hasattr(libc, "dladdr") and libc.dladdr(ctypes.cast(lib.ncclGetVersion, ctypes.c_void_p),
                                                   ctypes.byref(info)) and info.dli_fname:
            path = os.path.realpath(info.dli_fname.decode())
        return {"path": path, "version": nccl_version_string(code.value), "error": None}
    except (OSError, AttributeError) as e:
        return {"path": name_or_path, "version": None, "error": str(e).splitlines()[0][:200]}


def probe_nccl_library(name_or_path: str, timeout: float = 30) -> dict:
    """Loads a libnccl in a child process and asks it ncclGetVersion; says where it came from.
    Not in this process: a library loaded here stays loaded (dlclose does not unload it), and the
    loader matches a later NEEDED libnccl.so.2 (torch's) by that name, so `import torch` after the
    probe would bind torch to the probed copy, which may lack symbols torch needs."""
    code = ("import json, sys; from actorcc.doctor.facts import _probe_here; "
            "print(json.dumps(_probe_here(sys.argv[1])))")
    try:
        r = subprocess.run([sys.executable, "-c", code, name_or_path], capture_output=True, text=True,
                           timeout=timeout, env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        return {"path": name_or_path, "version": None, "error": f"the probe process failed: {e}"[:200]}


def _wheel_nccl_libs() -> list[dict]:
    """libnccl.so.2 shipped by the nvidia-nccl-cu* wheels, found without importing them."""
    seen, out = set(), []
    for base in sys.path:
        for lib in glob.glob(os.path.join(base or ".", "nvidia", "**", "libnccl.so*"), recursive=True):
            real = os.path.realpath(lib)
            if real not in seen and os.path.isfile(real):
                seen.add(real)
                out.append({"source": "pip wheel (nvidia-nccl-cu*)", "path": real})
    try:
        from importlib import metadata
        dists = {d.metadata["Name"]: d.version for d in metadata.distributions()
                 if (d.metadata["Name"] or "").lower().startswith("nvidia-nccl")}
    except Exception:  # noqa: BLE001 - metadata of a broken install must not stop the doctor
        dists = {}
    for c in out:
        c["dist"] = dists
    return out


def _ld_path_libs(environ) -> list[str]:
    out = []
    for d in (environ.get("LD_LIBRARY_PATH") or "").split(":"):
        if d:
            out += sorted(glob.glob(os.path.join(d, "libnccl.so*")))
    return out


def nccl_facts(torch_mode: str = "if-loaded", environ=None) -> dict:
    """The NCCL builds this process could use. `version` is the one NCCL users here get:
    torch's when torch says, else the wheel's when torch is installed (torch loads it through
    its RPATH), else what dlopen("libnccl.so.2") finds, else the wheel's.

    torch_mode: "if-loaded" asks torch only when it is already imported (no multi-second
    import), "import" imports it, "never" leaves it alone.
    """
    environ = os.environ if environ is None else environ
    # Before anything here loads a libnccl: which one this process has or would get.
    abi = abi_facts(environ)
    cands = []
    # By name first: once a wheel's copy is loaded, dlopen("libnccl.so.2") would return it.
    by_name = probe_nccl_library("libnccl.so.2")
    by_name["source"] = "dlopen(libnccl.so.2) (LD_LIBRARY_PATH, ld.so cache)"
    for c in _wheel_nccl_libs():
        c.update(probe_nccl_library(c["path"]))
        cands.append(c)
    if by_name["version"]:
        cands.insert(0, by_name)
    torch = _torch_nccl(torch_mode)
    if torch.get("version"):
        cands.insert(0, {"source": "torch.cuda.nccl", "path": torch.get("path"),
                         "version": torch["version"], "error": None})
    wheel = [c for c in cands if c["source"].startswith("pip") and c.get("version")]
    if torch.get("installed") and not torch.get("version") and wheel:
        cands.remove(wheel[0])  # torch loads the wheel's copy (RPATH): that is what users get
        cands.insert(0, wheel[0])
    if abi.get("provider") == "actorcc" and abi.get("version") and abi.get("how") != "wheel":
        # torch, CuPy and vLLM here get actorcc's library: that version is the one users see
        cands.insert(0, {"source": f"actorcc's libnccl.so.2 ({abi['how']})", "path": abi.get("path"),
                         "version": abi["version"], "error": None})
    version = next((c["version"] for c in cands if c.get("version")), None)
    return {"version": version, "candidates": cands, "torch": torch, "abi": abi,
            "ld_library_path_libs": _ld_path_libs(environ),
            "versions_differ": len({c["version"] for c in cands if c.get("version")}) > 1}


def abi_facts(environ=None) -> dict:
    """Whether this process's NCCL is actorcc's libnccl.so.2 or NVIDIA's, which version, and how
    it got there (actorcc.nccl.check: mapped, LD_PRELOAD, LD_AUDIT, the wheel, the loader's search)."""
    try:
        return nccl_abi.check(environ)
    except Exception as e:  # noqa: BLE001 - an unreadable library must not stop the doctor
        return {"provider": None, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}", "warnings": []}


def _torch_nccl(mode: str) -> dict:
    import importlib.util
    if "torch" not in sys.modules and mode != "import":
        installed = mode != "never" and importlib.util.find_spec("torch") is not None
        return {"installed": installed, "asked": False}
    try:
        import torch  # noqa: F401 - already imported, or asked for with --torch
        v = torch.cuda.nccl.version()
        v = ".".join(map(str, v)) if isinstance(v, tuple) else nccl_version_string(int(v))
        path = next((line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                     if "libnccl" in line), None)
        return {"installed": True, "asked": True, "version": v, "path": path,
                "torch_version": torch.__version__}
    except Exception as e:  # noqa: BLE001 - a CPU-only torch raises here
        return {"installed": True, "asked": True, "error": str(e).splitlines()[0][:200]}


# ---------------------------------------------------------------- VMM POSIX-fd probe
PROBE_NAME = "actorcc-vmm-probe"


def find_vmm_probe() -> str | None:
    """The probe binary: next to the package (wheel), on PATH, or in a build folder of the repo."""
    here = Path(__file__).resolve()
    spots = [os.environ.get("ACTORCC_VMM_PROBE"), str(here.parents[1] / "bin" / PROBE_NAME),
             shutil.which(PROBE_NAME)]
    repo = here.parents[3]
    spots += sorted(glob.glob(str(repo / "build*" / "tools" / "doctor" / PROBE_NAME)))
    return next((p for p in spots if p and os.path.isfile(p) and os.access(p, os.X_OK)), None)


DRIVER_LIB = "libcuda.so.1"


def missing_driver(lib: str = DRIVER_LIB) -> str | None:
    """Why no NVIDIA driver is usable here (its user-space library cannot be loaded), or None.
    Without it the CUDA runtime reports cudaErrorInsufficientDriver ("CUDA driver version is
    insufficient for CUDA runtime version"), which reads as if a driver existed but were old."""
    try:
        ctypes.CDLL(lib)
    except OSError as e:
        return f"no NVIDIA driver found ({lib} cannot be loaded: {str(e).split(': ')[-1]})"
    return None


def vmm_facts(visible: dict, gpus: list[dict], exe: str | None = None, timeout: float = 60,
              driver_lib: str = DRIVER_LIB) -> dict:
    """Runs the probe: exporter on this process's first visible GPU, importer on another GPU of
    the host (each process masked to its one GPU, as under Ray), or on the same GPU if only one."""
    exe = exe or find_vmm_probe()
    if not exe:
        return {"status": "not-built", "detail": f"{PROBE_NAME} not found (build target {PROBE_NAME})"}
    no_driver = missing_driver(driver_lib)
    if no_driver:
        return {"status": "skipped", "detail": no_driver, "gpus": None}
    env = dict(os.environ)
    cmd = [exe]
    pair = None
    if gpus and visible.get("physical"):
        a = visible["physical"][0]
        others = [i for i in visible["physical"][1:]] + [g["index"] for g in gpus if g["index"] != a]
        b = others[0] if others else a
        env["CUDA_VISIBLE_DEVICES"] = gpus[a]["uuid"]
        cmd += ["--child-visible-devices", gpus[b]["uuid"]]
        pair = [a, b]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "detail": f"probe did not finish in {timeout:.0f} s", "gpus": pair}
    except OSError as e:
        return {"status": "not-built", "detail": str(e)}
    result = {}
    for line in reversed(p.stdout.strip().splitlines()):
        try:
            result = json.loads(line)
            break
        except ValueError:
            continue
    status = {0: "ok", 2: "skipped"}.get(p.returncode, "failed")
    detail = result.get("detail") or result.get("error") or (p.stderr.strip().splitlines() or [""])[-1]
    return {"status": status, "detail": detail, "gpus": pair, "result": result, "exit_code": p.returncode}


# ---------------------------------------------------------------- everything
def actorcc_version() -> str | None:
    try:
        from actorcc import _actorcc  # type: ignore
        v = getattr(_actorcc, "version", None)
        return v() if callable(v) else v
    except Exception:  # noqa: BLE001 - the extension may not be built
        return None


def collect_local(vmm: bool = True, torch_mode: str = "if-loaded", nvml=None) -> dict:
    nv = nvml_mod.query(nvml)
    gpus = nv["gpus"] if nv["available"] else None
    visible = map_visible(os.environ.get("CUDA_VISIBLE_DEVICES"), gpus, os.environ.get("CUDA_DEVICE_ORDER"))
    facts = {"schema": SCHEMA, "host": host_facts(), "nvml": nv, "visible": visible,
             "env": env_facts(), "nccl": nccl_facts(torch_mode), "ib_devices": ib_devices(),
             "actorcc_version": actorcc_version()}
    facts["vmm"] = vmm_facts(visible, gpus or []) if vmm else {"status": "not-run", "detail": "--no-vmm"}
    facts["gpu"] = current_gpu(facts, 0)
    return facts


def current_gpu(facts: dict, ordinal: int | None) -> dict | None:
    """The GPU this process computes on (CUDA ordinal -> physical GPU), None without one."""
    phys = facts["visible"].get("physical") or []
    if ordinal is None or ordinal < 0 or ordinal >= len(phys) or not facts["nvml"]["available"]:
        return None
    g = facts["nvml"]["gpus"][phys[ordinal]]
    return {"index": g["index"], "uuid": g["uuid"], "pci_bus_id": g["pci_bus_id"], "name": g["name"]}
