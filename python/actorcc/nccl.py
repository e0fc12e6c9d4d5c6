"""actorcc's libnccl.so.2 (NCCL's C API over actorcc): where it is, how a process turns it on,
and which NCCL a process would load.

    python -m actorcc.nccl --path                 # the library's path
    python -m actorcc.nccl --env [--mode audit]   # shell lines that turn it on for child processes
    python -m actorcc.nccl --check [--json]       # which NCCL this process's calls reach, which version

    import actorcc.nccl
    actorcc.nccl.library_path()       # .../actorcc/lib/libnccl.so.2
    actorcc.nccl.env("preload")       # {"LD_PRELOAD": ..., "VLLM_NCCL_SO_PATH": ..., ...}
    actorcc.nccl.check()              # {"provider": "actorcc", "version": "2.32.3", ...}

Two ways to turn it on (docs/nccl-use.md): "preload" puts the library in LD_PRELOAD, so it is
the process's libnccl.so.2 before anything asks; "audit" sets LD_AUDIT to a small loader
module that answers every search for libnccl.so.2 with this library, so processes that never
use NCCL load nothing. Both also set VLLM_NCCL_SO_PATH (vLLM opens NCCL by that path).

This module is pure Python (no extension, no torch): the doctor and Ray's driver use it.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shlex
import struct
import sys
from pathlib import Path

LIB_NAME = "libnccl.so.2"
AUDIT_NAME = "libactorcc_nccl_audit.so"
# A build tree's library instead of the installed one (docs/settings.md; the LD_AUDIT module
# reads it too).
ENV_LIB = "ACTORCC_NCCL_ABI_LIB"
# actorcc's library carries an ELF note (section .note.actorcc) of this owner; its text says
# actorcc's version and the NCCL ABI it implements. NVIDIA's has none.
NOTE_OWNER = "actorcc"
MODES = ("preload", "audit")

__all__ = ["library_path", "audit_path", "env", "check", "read_note", "LibraryNotFound", "main"]


class LibraryNotFound(FileNotFoundError):
    """actorcc's libnccl.so.2 is not where it should be (a wheel built without it, or a wrong
    ACTORCC_NCCL_ABI_LIB)."""


def library_path(environ=None) -> str:
    """The absolute path of actorcc's libnccl.so.2: $ACTORCC_NCCL_ABI_LIB when set (a build
    tree's <build>/nccl/libnccl.so.2), else the installed actorcc/lib/libnccl.so.2. Raises
    LibraryNotFound saying where it looked."""
    environ = os.environ if environ is None else environ
    override = environ.get(ENV_LIB)
    if override:
        p = Path(override).expanduser()
        if not p.is_file():
            raise LibraryNotFound(f"{ENV_LIB}={override}: no such file (point it at a build's "
                                  f"<build>/nccl/{LIB_NAME}, or unset it to use the installed one)")
        return str(p.resolve())
    p = Path(__file__).resolve().parent / "lib" / LIB_NAME
    if not p.is_file():
        raise LibraryNotFound(f"actorcc's NCCL library is not installed: {p} does not exist (the package "
                              f"was built without the nccl/ front end; for a build tree set {ENV_LIB})")
    return str(p)


def audit_path(environ=None) -> str:
    """The LD_AUDIT module, which lies beside the library."""
    p = Path(library_path(environ)).parent / AUDIT_NAME
    if not p.is_file():
        raise LibraryNotFound(f"actorcc's LD_AUDIT module is missing: {p} does not exist "
                              f"(build target actorcc_nccl_audit, or use mode='preload')")
    return str(p)


def env(mode: str = "preload", environ=None) -> dict:
    """The environment variables that make a new process use actorcc's NCCL.

    mode "preload": LD_PRELOAD=<library>; "audit": LD_AUDIT=<module>. Both add
    VLLM_NCCL_SO_PATH=<library> and ACTORCC_NCCL_ABI_LIB=<library> (so the audit module and a
    child's actorcc.nccl find the same file). The values name only actorcc's files: merge them
    into an existing LD_PRELOAD yourself (actorcc.ray.nccl_runtime_env does for Ray)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    lib = library_path(environ)
    out = {"LD_PRELOAD": lib} if mode == "preload" else {"LD_AUDIT": audit_path(environ)}
    out.update({"VLLM_NCCL_SO_PATH": lib, ENV_LIB: lib})
    return out


# ---------------------------------------------------------------- which NCCL a process gets
def read_note(path) -> str | None:
    """The text of the library's actorcc ELF note, or None (not actorcc's, or not an ELF file).
    Reads the section headers; the file is not loaded."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:  # ELF64, little-endian only
        return None
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        for i in range(shnum):
            _, sh_type, _, _, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
            if sh_type != 7:  # SHT_NOTE
                continue
            pos, end = off, off + size
            while pos + 12 <= end:
                namesz, descsz, _ = struct.unpack_from("<III", data, pos)
                name = data[pos + 12:pos + 12 + namesz].rstrip(b"\0").decode(errors="replace")
                dpos = pos + 12 + (namesz + 3) // 4 * 4
                if name == NOTE_OWNER:
                    return data[dpos:dpos + descsz].split(b"\0")[0].decode(errors="replace")
                pos = dpos + (descsz + 3) // 4 * 4
    except struct.error:
        return None
    return None


def _is_nccl_file(path: str) -> bool:
    base = os.path.basename(path)
    return base == "libnccl.so" or base.startswith("libnccl.so.")


def _mapped_files(maps_text: str | None) -> list[str]:
    """The files mapped into the process (in order of first appearance)."""
    if maps_text is None:
        try:
            maps_text = Path("/proc/self/maps").read_text()
        except OSError:
            return []
    out = []
    for line in maps_text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and parts[5].strip() not in out:
            out.append(parts[5].strip())
    return out


def _mapped_nccl(maps_text: str | None) -> list[str]:
    """libnccl files mapped into the process (in order of first appearance)."""
    return [f for f in _mapped_files(maps_text) if _is_nccl_file(f)]


# ---------------------------------------------------------------- whose calls reach which library
# The objects that call NCCL, found among the mapped files: torch's CUDA library and CuPy's NCCL
# module are linked against libnccl.so.2 (their nccl* references are bound by the loader); vLLM
# opens the library named by VLLM_NCCL_SO_PATH with ctypes and calls through that handle.
LINKED_CALLERS = (
    ("torch", lambda f: os.path.basename(f).startswith("libtorch_cuda.so")),
    ("cupy", lambda f: "cupy_backends" in f and os.path.basename(f).startswith("nccl.")),
)
PROBE_SYMBOL = b"ncclGetVersion"


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _dl():
    """dlopen, dlsym, dladdr and dlclose of this process (glibc's, in libc or libdl)."""
    try:
        d = ctypes.CDLL(None)
        d.dladdr  # noqa: B018 - raises AttributeError where they live in libdl (glibc < 2.34)
    except AttributeError:
        d = ctypes.CDLL("libdl.so.2")
    d.dlopen.restype, d.dlopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
    d.dlsym.restype, d.dlsym.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]
    d.dladdr.restype, d.dladdr.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    d.dlclose.restype, d.dlclose.argtypes = ctypes.c_int, [ctypes.c_void_p]
    return d


def reached_by(obj: str, linked: bool = True) -> str | None:
    """The library whose ncclGetVersion the calls of the loaded object `obj` reach (its real path),
    or None where `obj` is not loaded in this process or nothing it can reach defines it.

    `linked` (torch, CuPy): `obj` references the symbol, and the loader binds the reference as
    for any library: the first definition in the global scope (the program, LD_PRELOAD, the
    libraries loaded RTLD_GLOBAL), which dlsym(RTLD_DEFAULT) finds; else the first among `obj`'s
    own dependencies, which dlsym on its handle finds. So a preloaded libnccl.so.2 takes every
    call of such a caller, even with another libnccl loaded by path beside it (torch's start-up
    maps NVIDIA's wheel copy that way); LD_BIND_NOW=1 LD_DEBUG=bindings shows the same
    bindings. Not linked (vLLM's ctypes handle of a library opened by path): the calls go
    through dlsym on that handle, i.e. to that library itself."""
    d = _dl()
    handle = d.dlopen(os.fsencode(obj), getattr(os, "RTLD_NOLOAD", 4) | getattr(os, "RTLD_LAZY", 1))
    if not handle:
        return None
    try:
        addr = d.dlsym(None, PROBE_SYMBOL) if linked else None  # RTLD_DEFAULT is NULL in glibc
        addr = addr or d.dlsym(handle, PROBE_SYMBOL)
    finally:
        d.dlclose(handle)
    info = _DlInfo()
    if not addr or not d.dladdr(addr, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.path.realpath(os.fsdecode(info.dli_fname))


def callers(environ=None, maps_text: str | None = None) -> list[dict]:
    """Each loaded caller of NCCL in this process and the library its calls reach: torch's
    libtorch_cuda.so and CuPy's nccl module where mapped, and vLLM's handle of
    VLLM_NCCL_SO_PATH where that library is loaded (vLLM opens it by path: one not loaded yet
    will be that file). Entries: caller, object, reaches (a path or None), provider, version."""
    environ = os.environ if environ is None else environ
    out = []
    files = _mapped_files(maps_text)
    for name, is_caller in LINKED_CALLERS:
        for f in (f for f in files if is_caller(f)):
            out.append({"caller": name, "object": f, "reaches": reached_by(f)})
    vllm = environ.get("VLLM_NCCL_SO_PATH")
    if vllm:
        real = os.path.realpath(vllm)
        loaded = real in {os.path.realpath(f) for f in files}
        out.append({"caller": "vllm", "object": vllm, "reaches": reached_by(real, linked=False) if loaded else None,
                    "loaded": loaded})
    for c in out:
        d = describe(c["reaches"]) if c["reaches"] else {}
        c.update(provider=d.get("provider"), version=d.get("version"))
    return out


def _wheel_nccl() -> str | None:
    """NVIDIA's libnccl.so.2 from the nvidia-nccl-cu* wheel, which torch finds through its
    RUNPATH (found without importing torch)."""
    import importlib.util
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        p = Path(base) / "nccl" / "lib" / LIB_NAME
        if p.is_file():
            return str(p.resolve())
    return None


def _version(path: str) -> tuple[int | None, str | None]:
    """ncclGetVersion of the library at `path` (loaded RTLD_LOCAL), or (None, why not)."""
    try:
        lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0))
        code = ctypes.c_int(0)
        rc = lib.ncclGetVersion(ctypes.byref(code))
        return (code.value, None) if rc == 0 else (None, f"ncclGetVersion returned {rc}")
    except (OSError, AttributeError) as e:
        return None, str(e).splitlines()[0][:200]


def version_text(code: int | None) -> str | None:
    if code is None:
        return None
    if code >= 10000:  # NCCL >= 2.9: major*10000 + minor*100 + patch
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def describe(path: str | None, load: bool = True) -> dict:
    """Who made the library at `path`: provider "actorcc" (its ELF note, or a path inside an
    actorcc package) or "nvidia" (anything else that is an NCCL), its version (ncclGetVersion,
    when load), and the note's text."""
    if not path:
        return {"path": None, "provider": None, "version": None, "code": None, "note": None, "error": "no library"}
    real = os.path.realpath(path) if os.path.exists(path) else path
    note = read_note(real)
    in_pkg = Path(real).parent.name == "lib" and Path(real).parent.parent.name == "actorcc"
    provider = "actorcc" if note or in_pkg else "nvidia"
    code, err = _version(real) if load else (None, None)
    if not os.path.exists(real):
        err = f"{real}: no such file"
    return {"path": real, "provider": provider, "version": version_text(code), "code": code, "note": note,
            "error": err}


def check(environ=None, maps_text: str | None = None, load: bool = True) -> dict:
    """Which NCCL this process's calls reach, or would: the first that applies of
      bound        the library the calls of a loaded caller reach (callers(): torch, CuPy, vLLM's
                   handle), not the first libnccl found: torch's start-up maps NVIDIA's wheel
                   copy by path even where a preloaded library takes every torch call
      loaded       a libnccl already mapped, no caller loaded yet
      LD_PRELOAD   a libnccl (or actorcc's library) in LD_PRELOAD
      LD_AUDIT     actorcc's audit module in LD_AUDIT: the library beside it or ACTORCC_NCCL_ABI_LIB
      wheel        NVIDIA's nvidia-nccl-cu* wheel (torch's RUNPATH)
      dlopen       none of these: the loader's search by name (LD_LIBRARY_PATH, ld.so cache)
    plus what vLLM would open (VLLM_NCCL_SO_PATH). Returns a dict with provider ("actorcc" or
    "nvidia"), path, version, how, note, vllm, mapped (every libnccl mapped), callers, unused
    (the libnccl files mapped that no caller reaches), warnings (what is a problem: callers that
    reach different libraries, a preload that cannot load) and notes (what is not: a copy only
    mapped)."""
    environ = os.environ if environ is None else environ
    mapped = _mapped_nccl(maps_text)
    preload = [p for p in (environ.get("LD_PRELOAD") or "").replace(" ", ":").split(":") if p]
    audits = [p for p in (environ.get("LD_AUDIT") or "").split(":") if p]
    audit = next((p for p in audits if os.path.basename(p) == AUDIT_NAME), None)
    found = callers(environ, maps_text)
    bound = [c for c in found if c["reaches"]]
    how, path = None, None
    if bound:
        how, path = "bound", bound[0]["reaches"]
    elif mapped:
        how, path = "loaded", mapped[0]
    elif any(_is_nccl_file(p) or read_note(p) for p in preload):
        how, path = "LD_PRELOAD", next(p for p in preload if _is_nccl_file(p) or read_note(p))
    elif audit:
        how = "LD_AUDIT"
        path = environ.get(ENV_LIB) or str(Path(audit).parent / LIB_NAME)
    else:
        wheel = _wheel_nccl()
        how, path = ("wheel", wheel) if wheel else ("dlopen", LIB_NAME)
    out = _by_name(load) if how == "dlopen" else describe(path, load=load)
    out["how"] = how
    out["mapped"] = mapped
    out["ld_preload"] = environ.get("LD_PRELOAD")
    out["ld_audit"] = environ.get("LD_AUDIT")
    vllm = environ.get("VLLM_NCCL_SO_PATH")
    out["vllm"] = describe(vllm, load=False) if vllm else None
    out["callers"] = found
    warnings, notes = [], []
    reached = {c["reaches"] for c in bound}
    out["unused"] = [m for m in mapped if os.path.realpath(m) not in reached] if bound else []
    if len(reached) > 1:
        warnings.append("the callers of NCCL in this process reach different libraries: " +
                        "; ".join(f"{c['caller']} ({c['object']}) -> {c['reaches']}" for c in bound) +
                        " (their communicators, comm handles and ncclGroupStart state do not mix: give every "
                        "caller the same library)")
    n_mapped = len({os.path.realpath(m) for m in mapped})
    if n_mapped > 1 and len(reached) == 1:
        notes.append(f"{n_mapped} NCCL libraries are mapped, but every call of {_names(bound)} reaches "
                     f"{path}; {', '.join(out['unused'])} is only mapped, not used, which is no problem "
                     "(torch's start-up loads NVIDIA's wheel copy by path beside a preloaded library; "
                     "nothing here calls it)")
    elif n_mapped > 1 and not bound:
        warnings.append(f"{'two' if n_mapped == 2 else n_mapped} NCCL libraries are mapped into this process: "
                        + ", ".join(mapped) + "; no caller of NCCL (torch, CuPy, vLLM) is loaded yet, so which "
                        "one calls will reach is not known: a library linked against libnccl.so.2 reaches the "
                        "first in the global scope (LD_PRELOAD first), and two callers reaching different "
                        "ones would not mix (comm handles, ncclGroupStart state)")
    vllm_entry = next((c for c in found if c["caller"] == "vllm"), None)
    others = [c for c in bound if c["caller"] != "vllm"]
    theirs = others[0]["reaches"] if others else out.get("path")
    mine = (vllm_entry["reaches"] if vllm_entry and vllm_entry["reaches"] else
            os.path.realpath(vllm) if vllm else None)
    if mine and theirs and os.path.isabs(theirs) and os.path.realpath(theirs) != mine:
        who = _names(others) if others else "the process"
        prov = describe(theirs, load=False)["provider"]
        warnings.append(f"VLLM_NCCL_SO_PATH names {out['vllm']['provider']}'s NCCL ({vllm}) but {who} "
                        f"{'gets' if not others else 'reaches'} {prov}'s ({theirs}): vLLM's PyNccl and "
                        f"{'torch' if not others else who} would use different libraries, whose communicators "
                        "do not mix")
    if how in ("LD_PRELOAD", "LD_AUDIT") and out.get("error"):
        warnings.append(f"{how} asks for {path}, which cannot be loaded: {out['error']}")
    if audit and preload and how == "LD_PRELOAD":
        warnings.append("both LD_PRELOAD and LD_AUDIT are set: the preloaded library wins")
    out["warnings"] = warnings
    out["notes"] = notes
    return out


def _names(entries) -> str:
    """The callers' names, once each, in order: "torch", "torch and vllm"."""
    names = list(dict.fromkeys(c["caller"] for c in entries))
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _by_name(load: bool) -> dict:
    """dlopen("libnccl.so.2") as the loader finds it (loading it is the only way to ask)."""
    if not load:
        return {"path": LIB_NAME, "provider": None, "version": None, "code": None, "note": None,
                "error": "not loaded (load=False)"}
    code, err = _version(LIB_NAME)
    mapped = _mapped_nccl(None)
    path = mapped[0] if mapped else None
    if path is None:
        return {"path": None, "provider": None, "version": None, "code": None, "note": None,
                "error": err or "no libnccl.so.2 found"}
    d = describe(path, load=False)
    d.update(version=version_text(code), code=code, error=err)
    return d


def summary(c: dict) -> str:
    """One line: which NCCL, which version, found how."""
    if not c.get("provider"):
        return f"no NCCL found ({c.get('error')})"
    who = "actorcc's NCCL" if c["provider"] == "actorcc" else "NVIDIA's NCCL"
    ver = f" {c['version']}" if c.get("version") else ""
    note = f" [{c['note']}]" if c.get("note") else ""
    bound = [x for x in c.get("callers") or () if x.get("reaches") == c["path"]]
    calls = f"; the calls of {_names(bound)} reach it" if bound else ""
    unused = f"; only mapped, not used: {', '.join(c['unused'])}" if c.get("unused") else ""
    return f"{who}{ver} ({c['path']}, {c['how']}){note}{calls}{unused}"


# ---------------------------------------------------------------- command line
def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m actorcc.nccl",
                                description="actorcc's libnccl.so.2: its path, the environment that turns it "
                                            "on, and which NCCL this process would load.")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--path", action="store_true", help="print the library's path")
    g.add_argument("--env", action="store_true", help="print `export` lines that turn it on")
    g.add_argument("--check", action="store_true", help="say whether this process gets actorcc's or NVIDIA's NCCL")
    p.add_argument("--mode", choices=MODES, default="preload", help="with --env: LD_PRELOAD or LD_AUDIT")
    p.add_argument("--json", action="store_true", help="with --check: the whole answer as JSON")
    args = p.parse_args(argv)
    try:
        if args.path:
            print(library_path())
        elif args.env:
            for k, v in env(args.mode).items():
                print(f"export {k}={shlex.quote(v)}")
        else:
            c = check()
            print(json.dumps(c, indent=1) if args.json else summary(c))
            for w in c["warnings"] if not args.json else ():
                print(f"warning: {w}", file=sys.stderr)
            for n in c["notes"] if not args.json else ():
                print(f"note: {n}", file=sys.stderr)
            return 0 if c.get("provider") else 1
    except LibraryNotFound as e:
        print(f"actorcc.nccl: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
