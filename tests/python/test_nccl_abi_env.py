"""Turning actorcc's libnccl.so.2 on, without a GPU: actorcc.nccl (the library's path, the
environment, which NCCL a process gets), the LD_AUDIT module (nccl/audit/audit.c) redirecting
the loader's search, and actorcc.ray.nccl_runtime_env reaching real (CPU) Ray actors.

The library itself is not needed: each test builds stand-ins with the C compiler, shared
objects with SONAME libnccl.so.2 whose ncclGetVersion returns a marker, one carrying actorcc's
ELF note (the "actorcc" one) and one without (the "NVIDIA" one)."""
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
AUDIT_C = ROOT / "nccl" / "audit" / "audit.c"
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")

ACTORCC_MARK, NVIDIA_MARK = 22901, 22809  # what each stand-in's ncclGetVersion returns


def _load_source():
    """actorcc/nccl.py from the source tree (pure Python: no extension needed)."""
    spec = importlib.util.spec_from_file_location("actorcc_nccl_under_test", SRC)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


nccl = _load_source()

STANDIN = r"""
#include <stdint.h>
#ifdef NOTE
/* actorcc's marker: an ELF note of owner "actorcc" (see actorcc/nccl.py's read_note) */
__attribute__((section(".note.actorcc"), used, aligned(4))) static const struct {
  uint32_t namesz, descsz, type; char name[8]; char desc[32];
} note = {8, 32, 1, "actorcc", "actorcc 0.1.0 nccl-abi 22901"};
#endif
int ncclGetVersion(int* v) { *v = MARK; return 0; }
"""

PROG = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
/* dlopen(argv[1] or "libnccl.so.2"), directly or through loader.so (argv[2] = its path) */
int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "libnccl.so.2";
  void* h;
  if (argc > 2) {
    void* l = dlopen(argv[2], RTLD_NOW);
    if (!l) { printf("NOLOADER %s\n", dlerror()); return 4; }
    void* (*open_it)(const char*) = (void* (*)(const char*))dlsym(l, "open_it");
    h = open_it(name);
  } else {
    h = dlopen(name, RTLD_NOW);
  }
  if (!h) { printf("NOTFOUND %s\n", dlerror()); return 3; }
  int (*f)(int*) = (int (*)(int*))dlsym(h, "ncclGetVersion");
  if (!f) { printf("NOSYMBOL\n"); return 5; }
  int v = 0;
  f(&v);
  Dl_info i;
  dladdr((void*)f, &i);
  printf("VERSION %d %s\n", v, i.dli_fname);
  return 0;
}
"""

LOADER = r"""
#include <dlfcn.h>
void* open_it(const char* name) { return dlopen(name, RTLD_NOW); }
"""


def _cc(args, cwd):
    subprocess.run([CC, *args], cwd=cwd, check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def stand(tmp_path_factory):
    """<d>/pkg/actorcc/lib/{libnccl.so.2 (actorcc stand-in), libactorcc_nccl_audit.so},
    <d>/pkg/actorcc/loader.so (an actorcc object that loads NCCL itself), <d>/nv/libnccl.so.2
    (NVIDIA stand-in), <d>/prog."""
    d = tmp_path_factory.mktemp("nccl-abi")
    lib = d / "pkg" / "actorcc" / "lib"
    lib.mkdir(parents=True)
    (d / "nv").mkdir()
    (d / "standin.c").write_text(STANDIN)
    (d / "prog.c").write_text(PROG)
    (d / "loader.c").write_text(LOADER)
    so = ["-shared", "-fPIC", "-Wl,-soname,libnccl.so.2", "standin.c"]
    _cc([*so, "-DNOTE", f"-DMARK={ACTORCC_MARK}", "-o", str(lib / "libnccl.so.2")], d)
    _cc([*so, f"-DMARK={NVIDIA_MARK}", "-o", str(d / "nv" / "libnccl.so.2")], d)
    # the audit module as nccl/audit/CMakeLists.txt builds it
    _cc(["-shared", "-fPIC", "-fvisibility=hidden", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", str(AUDIT_C),
         "-o", str(lib / nccl.AUDIT_NAME), "-ldl"], d)
    _cc(["-shared", "-fPIC", "loader.c", "-o", str(lib.parent / "loader.so"), "-ldl"], d)
    _cc(["prog.c", "-o", "prog", "-ldl"], d)
    return {"dir": d, "lib": lib / "libnccl.so.2", "audit": lib / nccl.AUDIT_NAME, "nv": d / "nv" / "libnccl.so.2",
            "loader": lib.parent / "loader.so", "prog": d / "prog"}


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", nccl.ENV_LIB, "VLLM_NCCL_SO_PATH")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _run(stand, *args, **env):
    p = subprocess.run([str(stand["prog"]), *map(str, args)], capture_output=True, text=True, timeout=30,
                       env=_clean_env(**env))
    return p.returncode, p.stdout.strip(), p.stderr.strip()


# ---------------------------------------------------------------- the LD_AUDIT module
def test_audit_redirects_the_search_by_name(stand):
    # Without the module the NVIDIA stand-in (first on LD_LIBRARY_PATH) is what dlopen finds ...
    rc, out, _ = _run(stand, LD_LIBRARY_PATH=stand["nv"].parent)
    assert rc == 0 and out == f"VERSION {NVIDIA_MARK} {stand['nv'].parent}/libnccl.so.2", out
    # ... with it, actorcc's, though the NVIDIA one is still first on the path.
    rc, out, err = _run(stand, LD_LIBRARY_PATH=stand["nv"].parent, LD_AUDIT=stand["audit"])
    assert rc == 0 and out == f"VERSION {ACTORCC_MARK} {stand['lib']}", (out, err)
    assert err == ""


def test_without_the_audit_the_stand_in_is_not_found(stand):
    # actorcc's library is not on any search path: only the module can make dlopen find it
    rc, out, _ = _run(stand)
    assert str(stand["lib"]) not in out and f"VERSION {ACTORCC_MARK}" not in out, out
    assert rc == 3 or out.startswith("VERSION"), out  # nothing, or a system NCCL (CUDA images)


@pytest.mark.parametrize("name", ["libnccl.so", "{nv}", "libnccl.so.2.28.9"])
def test_audit_redirects_other_spellings(stand, name):
    name = name.format(nv=stand["nv"])
    rc, out, _ = _run(stand, name, LD_LIBRARY_PATH=stand["nv"].parent, LD_AUDIT=stand["audit"])
    assert rc == 0 and out == f"VERSION {ACTORCC_MARK} {stand['lib']}", out


def test_audit_leaves_other_libraries_and_actorcc_own_searches_alone(stand):
    # a search made by an object of the actorcc package (the hierarchical backend loading
    # NVIDIA's NCCL for its rails) is not redirected
    rc, out, _ = _run(stand, "libnccl.so.2", stand["loader"], LD_LIBRARY_PATH=stand["nv"].parent,
                      LD_AUDIT=stand["audit"])
    assert rc == 0 and out == f"VERSION {NVIDIA_MARK} {stand['nv'].parent}/libnccl.so.2", out
    # another library entirely: untouched (it has no ncclGetVersion)
    rc, out, _ = _run(stand, "libm.so.6", LD_AUDIT=stand["audit"])
    assert rc == 5 and out == "NOSYMBOL", out


def test_audit_target_override_and_missing_target(stand):
    rc, out, _ = _run(stand, LD_AUDIT=stand["audit"], ACTORCC_NCCL_ABI_LIB=stand["nv"])
    assert rc == 0 and out == f"VERSION {NVIDIA_MARK} {stand['nv']}", out
    # a wrong path fails loudly, naming it, rather than falling back to NVIDIA's NCCL
    missing = stand["dir"] / "nowhere" / "libnccl.so.2"
    rc, out, err = _run(stand, LD_LIBRARY_PATH=stand["nv"].parent, LD_AUDIT=stand["audit"],
                        ACTORCC_NCCL_ABI_LIB=missing)
    assert rc == 3 and str(missing) in out, out
    assert "actorcc nccl audit" in err and str(missing) in err, err


def test_audit_reaches_children_through_the_environment(stand):
    # LD_AUDIT is inherited like LD_PRELOAD: a child started by a shell is redirected too
    p = subprocess.run(["/bin/sh", "-c", f"'{stand['prog']}'"], capture_output=True, text=True, timeout=30,
                       env=_clean_env(LD_AUDIT=stand["audit"]))
    assert p.stdout.strip() == f"VERSION {ACTORCC_MARK} {stand['lib']}", p.stdout


# ---------------------------------------------------------------- actorcc.nccl
def test_library_path_installed_override_and_missing(stand, tmp_path):
    # installed layout: actorcc/lib/libnccl.so.2 beside a copy of the module
    pkg = stand["lib"].parent.parent
    shutil.copy(SRC, pkg / "nccl.py")
    spec = importlib.util.spec_from_file_location("installed_nccl", pkg / "nccl.py")
    inst = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inst)
    assert inst.library_path({}) == str(stand["lib"])
    assert inst.audit_path({}) == str(stand["audit"])
    assert inst.library_path({nccl.ENV_LIB: str(stand["nv"])}) == str(stand["nv"])
    with pytest.raises(nccl.LibraryNotFound, match="ACTORCC_NCCL_ABI_LIB=.*no such file"):
        nccl.library_path({nccl.ENV_LIB: str(tmp_path / "none.so")})
    if not (SRC.parent / "lib" / "libnccl.so.2").exists():
        with pytest.raises(nccl.LibraryNotFound, match="not installed"):
            nccl.library_path({})
    (pkg / "nccl.py").unlink()


def test_env_modes(stand):
    e = {nccl.ENV_LIB: str(stand["lib"])}
    pre = nccl.env("preload", e)
    assert pre == {"LD_PRELOAD": str(stand["lib"]), "VLLM_NCCL_SO_PATH": str(stand["lib"]),
                   nccl.ENV_LIB: str(stand["lib"])}
    aud = nccl.env("audit", e)
    assert aud["LD_AUDIT"] == str(stand["audit"]) and "LD_PRELOAD" not in aud
    with pytest.raises(ValueError, match="mode"):
        nccl.env("inject", e)


def test_read_note_and_describe(stand):
    assert nccl.read_note(stand["lib"]) == "actorcc 0.1.0 nccl-abi 22901"
    assert nccl.read_note(stand["nv"]) is None and nccl.read_note(SRC) is None
    d = nccl.describe(str(stand["lib"]))
    assert (d["provider"], d["version"], d["code"]) == ("actorcc", "2.29.1", ACTORCC_MARK)
    d = nccl.describe(str(stand["nv"]))
    assert (d["provider"], d["version"]) == ("nvidia", "2.28.9")


def test_check_on_synthetic_state(stand):
    maps = (f"7f00-7f10 r-xp 00000000 08:01 1 {stand['nv']}\n"
            f"7f10-7f20 r-xp 00000000 08:01 2 {stand['lib']}\n7f20-7f30 rw-p 0 0:0 0 [heap]\n")
    c = nccl.check({}, maps_text=maps)
    assert c["how"] == "loaded" and c["provider"] == "nvidia" and len(c["mapped"]) == 2
    assert any("two NCCL libraries" in w for w in c["warnings"])
    c = nccl.check({"LD_PRELOAD": f"/x/libfoo.so {stand['lib']}", "VLLM_NCCL_SO_PATH": str(stand["nv"])},
                   maps_text="")
    assert (c["how"], c["provider"], c["version"]) == ("LD_PRELOAD", "actorcc", "2.29.1")
    assert any("VLLM_NCCL_SO_PATH" in w for w in c["warnings"])
    c = nccl.check({"LD_AUDIT": str(stand["audit"])}, maps_text="")
    assert (c["how"], c["provider"], c["path"]) == ("LD_AUDIT", "actorcc", str(stand["lib"]))
    c = nccl.check({"LD_AUDIT": str(stand["audit"]), nccl.ENV_LIB: "/gone/libnccl.so.2"}, maps_text="")
    assert any("cannot be loaded" in w for w in c["warnings"])
    assert "actorcc's NCCL 2.29.1" in nccl.summary(nccl.check({"LD_PRELOAD": str(stand["lib"])}, maps_text=""))


def _py(code, **env):
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=_clean_env(**env))
    assert p.returncode == 0, p.stderr
    return p.stdout


CHECK = (f"import importlib.util, json; s = importlib.util.spec_from_file_location('n', {str(SRC)!r}); "
         "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); {pre}print(json.dumps(m.check()))")


def test_check_in_real_processes(stand):
    # preloaded: mapped at start
    c = json.loads(_py(CHECK.format(pre=""), LD_PRELOAD=stand["lib"]))
    assert (c["how"], c["provider"], c["version"], c["path"]) == ("loaded", "actorcc", "2.29.1", str(stand["lib"]))
    # audit: nothing mapped until NCCL is asked for; then dlopen by name maps actorcc's
    c = json.loads(_py(CHECK.format(pre=""), LD_AUDIT=stand["audit"]))
    assert (c["how"], c["provider"]) == ("LD_AUDIT", "actorcc")
    c = json.loads(_py(CHECK.format(pre="import ctypes; ctypes.CDLL('libnccl.so.2'); "),
                       LD_AUDIT=stand["audit"], LD_LIBRARY_PATH=stand["nv"].parent))
    assert (c["how"], c["provider"], c["mapped"]) == ("loaded", "actorcc", [str(stand["lib"])])
    # neither: NVIDIA's
    c = json.loads(_py(CHECK.format(pre="import ctypes; ctypes.CDLL('libnccl.so.2'); "),
                       LD_LIBRARY_PATH=stand["nv"].parent))
    assert (c["how"], c["provider"], c["version"]) == ("loaded", "nvidia", "2.28.9")


def test_cli(stand):
    def cli(*args, **env):
        return subprocess.run([sys.executable, str(SRC), *args], capture_output=True, text=True, timeout=60,
                              env=_clean_env(**env))
    p = cli("--path", ACTORCC_NCCL_ABI_LIB=stand["lib"])
    assert p.returncode == 0 and p.stdout.strip() == str(stand["lib"])
    p = cli("--env", "--mode", "audit", ACTORCC_NCCL_ABI_LIB=stand["lib"])
    assert p.returncode == 0 and f"export LD_AUDIT={stand['audit']}" in p.stdout.splitlines()
    # the printed lines, sourced by a shell, turn it on for the shell's children
    p = subprocess.run(["/bin/sh", "-c", f"eval \"$(\"{sys.executable}\" {SRC} --env)\" && \"{stand['prog']}\""],
                       capture_output=True, text=True, timeout=60,
                       env=_clean_env(ACTORCC_NCCL_ABI_LIB=stand["lib"], LD_LIBRARY_PATH=stand["nv"].parent))
    assert p.stdout.strip() == f"VERSION {ACTORCC_MARK} {stand['lib']}", (p.stdout, p.stderr)
    p = cli("--check", LD_PRELOAD=stand["lib"])
    assert p.returncode == 0 and p.stdout.startswith("actorcc's NCCL 2.29.1"), p.stdout
    p = cli("--path", ACTORCC_NCCL_ABI_LIB="/nowhere/libnccl.so.2")
    assert p.returncode == 1 and "no such file" in p.stderr


def test_module_entry_point_when_installed(stand):
    if importlib.util.find_spec("actorcc") is None or importlib.util.find_spec("actorcc._actorcc") is None:
        pytest.skip("actorcc is not installed")
    p = subprocess.run([sys.executable, "-m", "actorcc.nccl", "--check", "--json"], capture_output=True, text=True,
                       timeout=60, env=_clean_env(LD_PRELOAD=stand["lib"]))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["provider"] == "actorcc"


# ---------------------------------------------------------------- Ray's runtime_env
def _ray_helper():
    pytest.importorskip("ray")
    try:
        import actorcc.ray
    except ImportError:
        pytest.skip("actorcc is not installed")
    return actorcc.ray


def test_nccl_runtime_env_merges(stand, monkeypatch):
    ar = _ray_helper()
    monkeypatch.setenv(nccl.ENV_LIB, str(stand["lib"]))
    lib = str(stand["lib"])
    assert ar.nccl_runtime_env() == {"env_vars": {"LD_PRELOAD": lib, "VLLM_NCCL_SO_PATH": lib, nccl.ENV_LIB: lib}}
    base = {"pip": ["x"], "env_vars": {"NCCL_DEBUG": "INFO", "LD_PRELOAD": f"/opt/libjemalloc.so:{lib}"}}
    frozen = json.dumps(base)
    rt = ar.nccl_runtime_env(base)
    assert json.dumps(base) == frozen  # the caller's dict is not changed
    assert rt["pip"] == ["x"] and rt["env_vars"]["NCCL_DEBUG"] == "INFO"
    assert rt["env_vars"]["LD_PRELOAD"] == f"{lib}:/opt/libjemalloc.so"
    rt = ar.nccl_runtime_env({"env_vars": {"LD_AUDIT": "/opt/other.so"}}, mode="audit")
    assert rt["env_vars"]["LD_AUDIT"] == f"{stand['audit']}:/opt/other.so"
    with pytest.raises(ValueError, match="VLLM_NCCL_SO_PATH"):
        ar.nccl_runtime_env({"env_vars": {"VLLM_NCCL_SO_PATH": str(stand["nv"])}})


class NcclProbe:
    """A Ray actor that says what its process got."""

    def report(self, src):
        spec = importlib.util.spec_from_file_location("actor_nccl", src)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        env = {k: os.environ.get(k) for k in ("LD_PRELOAD", "LD_AUDIT", "VLLM_NCCL_SO_PATH", "NCCL_DEBUG")}
        if os.environ.get("LD_AUDIT"):
            import ctypes
            ctypes.CDLL("libnccl.so.2")  # what torch's libtorch_cuda does at import
        return {"env": env, "check": m.check()}


@pytest.mark.ray
def test_runtime_env_reaches_ray_actors(stand, monkeypatch):
    ar = _ray_helper()
    import ray
    monkeypatch.setenv(nccl.ENV_LIB, str(stand["lib"]))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent)] + sys.path))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        Probe = ray.remote(num_cpus=0)(NcclProbe)
        pre = Probe.options(runtime_env=ar.nccl_runtime_env({"env_vars": {"NCCL_DEBUG": "WARN"}})).remote()
        aud = Probe.options(runtime_env=ar.nccl_runtime_env(mode="audit")).remote()
        plain = Probe.remote()
        got = ray.get([a.report.remote(str(SRC)) for a in (pre, aud, plain)], timeout=240)
    finally:
        ray.shutdown()
    pre, aud, plain = got
    assert pre["env"]["LD_PRELOAD"] == str(stand["lib"]) and pre["env"]["NCCL_DEBUG"] == "WARN"
    # "bound" where the actor's process has loaded torch (its calls reach the preload), else "loaded"
    assert pre["check"]["how"] in ("loaded", "bound"), pre["check"]
    assert (pre["check"]["provider"], pre["check"]["version"]) == ("actorcc", "2.29.1")
    assert aud["env"]["LD_AUDIT"] == str(stand["audit"])
    assert aud["check"]["how"] in ("loaded", "bound") and aud["check"]["provider"] == "actorcc", aud
    assert plain["env"]["LD_PRELOAD"] is None and plain["check"]["provider"] != "actorcc"
