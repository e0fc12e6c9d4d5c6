"""Code and its comments say why in words: a reference to one of the project's issue numbers
means nothing to a reader without the tracker, and goes stale when the issue closes. An upstream
project's issue (an NCCL one, say) is a citation and stays allowed."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCANNED = ("src", "python", "tools", "bench", "scripts", "tests", "nccl", "examples")
SKIPPED = ("bench/results", "tests/unit/data", "tests/fuzz/corpus")
SUFFIXES = (".c", ".cpp", ".cu", ".h", ".hpp", ".cuh", ".py", ".sh", ".txt", ".cmake", ".md", ".toml", ".map")
UPSTREAM = ("NCCL", "nccl", "PyTorch", "torch", "Ray", "vLLM", "CUDA")
# Spelled in two parts so that this file does not match itself.
REFERENCE = re.compile(r"(?:(\w+) )?\b" + "iss" + r"ues? #?\d+", re.I)


def texts():
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            rel_dir = os.path.relpath(dirpath, ROOT)
            dirnames[:] = sorted(d for d in dirnames if os.path.join(rel_dir, d) not in SKIPPED
                                 and d not in ("__pycache__", "build"))
            for name in sorted(filenames):
                if name.endswith(SUFFIXES) or name == "CMakeLists.txt":
                    yield os.path.join(rel_dir, name)


def test_no_issue_numbers_in_code():
    found = []
    for path in texts():
        with open(os.path.join(ROOT, path), errors="replace") as f:
            for n, line in enumerate(f, 1):
                for m in REFERENCE.finditer(line):
                    if m.group(1) not in UPSTREAM:
                        found.append(f"{path}:{n}: {line.strip()}")
    assert not found, "references to issue numbers (say the reason instead):\n" + "\n".join(found)
