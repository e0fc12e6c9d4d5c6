"""The README's snippets must run as pasted. The torch one lacked `import torch`,
the elastic and from_address lines were fragments that did not say so, and the README had grow run
"on the others" where every member calls it (docs/elastic.md). Every code block of README.md is
fenced with its language; each ```python block is a whole program, run here on CPU (`# torchrun
...` as its first line: run by torchrun with those arguments; Ray ones where Ray is installed), or
starts with `# fragment:` naming a file of this tree that runs; a ```cpp block is such a fragment;
every path of this tree that a ```sh block names exists."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(ROOT, "README.md")
LANGS = ("python", "cpp", "sh", "text")
RUNNABLE = re.compile(r"[\w./-]+\.(?:py|cpp|c|sh)\b")
TREE_PATH = re.compile(r"\b(?:scripts|examples|bench|tools|tests|docs|python|nccl)/[\w./-]*\w")
# What the whole programs print (identified by a line of their code): checked beside the exit status.
OUTPUT = {
    "pool.starmap(rank_main, [(r, 4, uid)": [f"rank {r}: [10. 10. 10. 10.] [0 1 2 3]" for r in range(4)],
    'init_process_group("actorcc")': [f"rank {r}: [3.0, 3.0, 3.0, 3.0]" for r in range(2)],
    "from_address(": [f"rank {r}: [3. 3. 3. 3.]" for r in range(2)],
}


def blocks():
    """(language, code, line number) of every fenced block of README.md."""
    with open(README) as f:
        text = f.read()
    out = []
    for m in re.finditer(r"^```(\S*)\n(.*?)^```\s*$", text, re.S | re.M):
        out.append((m.group(1), m.group(2), text[:m.start()].count("\n") + 1))
    return out


def _programs():
    return [pytest.param(code, line, id=f"line{line}") for lang, code, line in blocks()
            if lang == "python" and not code.startswith("# fragment:")]


def test_every_block_is_fenced_with_its_language_and_every_fragment_names_a_runnable_file():
    with open(README) as f:
        lines = f.read().splitlines()
    fenced, indented = False, []
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("    ") and i and not lines[i - 1].strip() and not re.match(r"\s+[-*|]", line):
            indented.append(f"line {i + 1}: {line.strip()}")
    assert not indented, f"code indented instead of fenced (no language, not run): {indented}"
    found = blocks()
    assert len(_programs()) >= 4, found  # native CPU processes, torch, Ray, from_address
    for lang, code, line in found:
        assert lang in LANGS, f"README.md line {line}: block of language {lang!r} (one of {LANGS})"
        first = code.splitlines()[0]
        if lang == "cpp" or lang == "python" and first.startswith("# fragment:"):
            assert re.match(r"(#|//) fragment:", first), f"README.md line {line}: not marked as a fragment: {first}"
            files = [p for p in RUNNABLE.findall(first) if os.path.isfile(os.path.join(ROOT, p))]
            assert files, f"README.md line {line}: the fragment names no runnable file of this tree: {first}"
        if lang == "sh":
            for p in TREE_PATH.findall(code):
                assert os.path.exists(os.path.join(ROOT, p)), f"README.md line {line}: {p} does not exist"


@pytest.mark.parametrize("code,line", _programs())
def test_whole_program_runs_as_pasted(tmp_path, code, line):
    if re.search(r"^import ray\b", code, re.M):
        pytest.importorskip("ray")
    if re.search(r"^import torch\b", code, re.M):
        pytest.importorskip("torch")
    path = tmp_path / "snippet.py"
    path.write_text(code)
    first = code.splitlines()[0]
    cmd = [sys.executable, str(path)]
    if first.startswith("# torchrun "):
        args = first[len("# torchrun "):].split()
        cmd = [sys.executable, "-m", "torch.distributed.run", *args[:-1], str(path)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, f"README.md line {line}:\n{code}\n--- rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    for key, want in OUTPUT.items():
        if key in code:
            # The ranks share one stdout; an unbuffered print writes its text and its newline
            # apart, so lines of two ranks may run together: compare the ranks' lines as found.
            got = sorted(re.findall(r"rank \d+: [^\n]*?\](?: \[[^\]\n]*\])?", p.stdout))
            assert got == want, f"README.md line {line}: printed {p.stdout!r}"
    if "import ray" in code:
        assert p.stdout.count("array([6., 6., 6., 6.], dtype=float32)") == 4, p.stdout
