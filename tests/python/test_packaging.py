"""What `pip install .` brings (pyproject.toml's dependencies) covers what the README's first
check runs: examples/cpu_collectives.py imports nothing beyond the standard library, actorcc
and those dependencies (it checks its results with numpy, which the package's own import does
not need), and the README's Install section says so."""
import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
pytestmark = pytest.mark.skipif(not (ROOT / "pyproject.toml").exists() or sys.version_info < (3, 10),
                                reason="needs the source tree (and sys.stdlib_module_names, Python 3.10)")


def _dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0].lower().replace("_", "-") for d in project["dependencies"]}


def _imports(path):
    tops = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            tops.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            tops.add(node.module.split(".")[0])
    return tops


def _first_check_needs():
    return _imports(ROOT / "examples" / "cpu_collectives.py") - set(sys.stdlib_module_names) - {"actorcc"}


def test_the_first_check_imports_only_what_install_brings():
    needed = _first_check_needs()
    assert needed, "the first check imports no third-party module: this test checks nothing"
    missing = sorted(m for m in needed if m.lower() not in _dependencies())
    assert not missing, f"examples/cpu_collectives.py imports {missing}, which pyproject.toml's dependencies lack"


def test_readme_install_names_what_the_first_check_needs():
    readme = (ROOT / "README.md").read_text()
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    missing = sorted(m for m in _first_check_needs() | _dependencies() if m not in install)
    assert not missing, f"README's Install section does not name {missing}"
