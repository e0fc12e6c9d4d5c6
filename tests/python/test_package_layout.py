"""The shape of the Python package: the public names of actorcc.torch and actorcc.ray (each a
package of small modules) are the ones users had when each was one file, no module grows past
600 lines, the communicator and its collective calls do not import each other, and importing
actorcc (its Ray parts included) imports neither torch nor ray."""
import ast
import subprocess
import sys
import types
from pathlib import Path

import pytest


SRC = Path(__file__).resolve().parents[2] / "python" / "actorcc"
MAX_LINES = 600

# The names each module had, besides the modules it imported (torch, os, ...): what a user could
# import from it. A name may be added on purpose; none may go.
TORCH_NAMES = {
    "ActorccProcessGroup", "BACKEND_NAME", "Communicator", "DeviceWork", "DoneWork", "HostQueue",
    "HostWork", "InvalidArgumentError", "UniqueId", "UnsupportedError", "current_stream",
    "record_event", "register", "shrink_group",
}
TORCH_ALL = ["BACKEND_NAME", "register", "ActorccProcessGroup"]
RAY_NAMES = {
    "BACKEND_NAME", "Communicator", "Error", "GroupJoinError", "InvalidArgumentError", "NOTICE_AFTER_S",
    "UniqueId", "create_collective_group", "create_group", "destroy_group", "doctor", "get_group",
    "group_members", "grow_collective_group", "grow_group", "nccl_runtime_env", "register_backend",
    "register_backend_on", "register_tensor_transport", "rejoin_collective_group", "rejoin_group",
    "run_on", "shrink_collective_group", "shrink_group",
}
RAY_ALL = [
    "create_group", "get_group", "destroy_group", "GroupJoinError", "register_backend",
    "register_backend_on", "create_collective_group", "BACKEND_NAME", "doctor", "nccl_runtime_env",
    "shrink_group", "grow_group", "rejoin_group", "group_members",
    "shrink_collective_group", "grow_collective_group", "rejoin_collective_group",
]
RAY_TRANSPORT_NAMES = {"TRANSPORT_NAME", "pair_groups", "register_tensor_transport", "transfer_errors"}


def _public(module):
    """The public names of `module` that are not modules (nor the __future__ import)."""
    return {n for n in dir(module) if not n.startswith("_") and n != "annotations"
            and not isinstance(getattr(module, n), types.ModuleType)}


def test_torch_names_unchanged():
    pytest.importorskip("torch")
    import actorcc.torch as at
    assert _public(at) == TORCH_NAMES
    assert at.__all__ == TORCH_ALL


def test_ray_names_unchanged():
    import actorcc.ray as ar
    import actorcc.ray_transport as rt
    assert _public(ar) == RAY_NAMES
    assert ar.__all__ == RAY_ALL
    assert _public(rt) == RAY_TRANSPORT_NAMES
    assert rt.register_tensor_transport is ar.register_tensor_transport


def test_torch_and_ray_are_packages():
    for name in ("torch", "ray"):
        assert (SRC / name / "__init__.py").is_file(), name
        assert not (SRC / f"{name}.py").exists(), name


def test_no_module_over_600_lines():
    assert SRC.is_dir(), SRC
    long = {str(p.relative_to(SRC)): n for p in sorted(SRC.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def _imports(path):
    """(module, names) for each import in `path`, anywhere in it (function bodies too), relative
    imports resolved against its own package; names is empty for a plain `import module`."""
    package = list(path.relative_to(SRC.parent).parts[:-1])  # a module's package, or an __init__'s own
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, ()
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            yield ".".join(base + ([node.module] if node.module else [])), tuple(a.name for a in node.names)


def _imported_modules(path):
    """Every module `path` imports, and every name it imports from one (as module.name)."""
    out = set()
    for mod, names in _imports(path):
        out.add(mod)
        out.update(f"{mod}.{n}" for n in names)
    return out


def _is_module(dotted):
    rel = Path(*dotted.split(".")[1:])
    return dotted == "actorcc._actorcc" or (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


def test_every_actorcc_import_names_a_module_that_exists():
    # A function-level import runs only when its call does (an error path, say): one that
    # names a module the package no longer has is found here rather than by that call.
    wrong = sorted(f"{p.relative_to(SRC)}: {mod}" for p in SRC.rglob("*.py") for mod, _ in _imports(p)
                   if mod.split(".")[0] == "actorcc" and not _is_module(mod))
    assert not wrong, wrong


def test_collectives_and_work_do_not_import_the_communicator():
    # The communicator imports its collective calls (a mixin) and Work; nothing they hold may
    # import it back, even lazily inside a function.
    for name in ("collectives.py", "work.py", "_refusal.py"):
        assert "actorcc.communicator" not in _imported_modules(SRC / name), name
    assert "actorcc.collectives" in _imported_modules(SRC / "communicator.py")


def test_import_actorcc_imports_neither_torch_nor_ray():
    code = ("import sys, actorcc, actorcc.ray, actorcc.ray_transport\n"
            "print('torch' in sys.modules, 'ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"], out.stdout
