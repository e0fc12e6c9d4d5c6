"""The include layers of docs/design.md hold: every `#include "..."` of the C++/CUDA sources points
down the table of its "Include layers" section, or is one of that table's exception rows, each
with its reason. A file under no folder of the table, a row that names no folder of the tree and an
exception that no include uses all fail too, so the table stays the tree's."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DESIGN = os.path.join(ROOT, "docs", "design.md")
SCANNED = ("src", "tools", "tests", "nccl", "python/src")
SOURCE_SUFFIXES = (".c", ".cpp", ".cu", ".h", ".hpp", ".cuh")
# Where a quoted include is looked for after the including file's own folder and the folders
# above it: the include paths the build gives (CMakeLists.txt, nccl/, tools/bench/).
INCLUDE_ROOTS = ("src", "include", "nccl/src", "tests")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
CODE = re.compile(r"`([^`]+)`")


def layer_table():
    """(folders, exceptions): folders maps a folder to (layer, the folders it may include, or None
    for every lower layer); exceptions maps (file, target) to the reason, a target being a file
    or a folder."""
    with open(DESIGN) as f:
        text = f.read()
    section = text.split("## Include layers", 1)[1].split("\n## ", 1)[0]
    folders, exceptions = {}, {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        name, layer, allowed = cells[0].strip("`"), cells[1], cells[2]
        if layer == "exception":
            target, _, why = allowed.partition(":")
            exceptions[(name, target.strip().strip("`"))] = why.strip()
        elif allowed.startswith("lower layers"):
            folders[name] = (int(layer), None)
        else:
            folders[name] = (int(layer), CODE.findall(allowed.split(":")[0]))
    return folders, exceptions


def folder_of(path, folders):
    best = None
    for f in folders:
        if (path == f or path.startswith(f + "/")) and (best is None or len(f) > len(best)):
            best = f
    return best


def resolve(path, inc):
    """The tree path of a quoted include of `path`, or None for a header from outside the tree."""
    d = os.path.dirname(path)
    while True:
        candidate = os.path.normpath(os.path.join(d, inc))
        if os.path.isfile(os.path.join(ROOT, candidate)):
            return candidate
        if not d:
            break
        d = os.path.dirname(d)
    for r in INCLUDE_ROOTS:
        candidate = os.path.normpath(os.path.join(r, inc))
        if os.path.isfile(os.path.join(ROOT, candidate)):
            return candidate
    return None


def sources():
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in ("corpus", "data"))
            for name in sorted(filenames):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def includes():
    """(file, included file) for every quoted include that names a file of the tree."""
    for path in sources():
        with open(os.path.join(ROOT, path), errors="replace") as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            target = resolve(path, inc)
            if target is not None:
                yield path, target


def exception_for(path, target, exceptions):
    for (src, dst) in exceptions:
        if path == src and (target == dst or target.startswith(dst + "/")):
            return (src, dst)
    return None


def test_table_is_well_formed():
    folders, exceptions = layer_table()
    assert len(folders) > 10, "the layer table of docs/design.md was not found"
    for name, (layer, allowed) in folders.items():
        assert os.path.isdir(os.path.join(ROOT, name)), f"{name}: not a folder of the tree"
        for a in allowed or []:
            assert a in folders, f"{name} may include {a}, which has no row"
            assert folders[a][0] < layer, f"{name} (layer {layer}) may include {a} (layer {folders[a][0]}): not lower"
    for (src, dst), why in exceptions.items():
        assert os.path.exists(os.path.join(ROOT, src)), f"exception from {src}: no such file"
        assert os.path.exists(os.path.join(ROOT, dst)), f"exception to {dst}: no such file or folder"
        assert why, f"exception {src} -> {dst} gives no reason"


def test_every_include_points_down():
    folders, exceptions = layer_table()
    wrong, unplaced, used = [], set(), set()
    for path, target in includes():
        src, dst = folder_of(path, folders), folder_of(target, folders)
        if src is None or dst is None:
            unplaced.update(p for p, f in ((path, src), (target, dst)) if f is None)
            continue
        if src == dst:
            continue
        exc = exception_for(path, target, exceptions)
        if exc is not None:
            used.add(exc)
            continue
        layer, allowed = folders[src]
        ok = folders[dst][0] < layer if allowed is None else dst in allowed
        if not ok:
            wrong.append(f"{path} (layer {layer}, {src}) -> {target} (layer {folders[dst][0]}, {dst})")
    assert not unplaced, "files under no folder of docs/design.md's layer table: " + ", ".join(sorted(unplaced))
    assert not wrong, "includes against the layers of docs/design.md:\n" + "\n".join(wrong)
    unused = sorted(f"{s} -> {d}" for s, d in set(exceptions) - used)
    assert not unused, "exceptions that no include uses: " + ", ".join(unused)
