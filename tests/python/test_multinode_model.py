"""docs/multinode.md quotes the cost model's tables; they must be what the script computes,
and the model must keep the properties the page draws from it."""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "docs", "multinode_model.py")
DOC = os.path.join(ROOT, "docs", "multinode.md")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], check=True, capture_output=True, text=True, timeout=60).stdout


def rows(text, coll):
    """{size label: [floats]} of the table under '### coll'."""
    block = text.split(f"### {coll} (model)")[1].split("###")[0]
    out = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 2 and re.fullmatch(r"\d+ [KMG]", cells[0]):
            out[cells[0]] = [float(c.rstrip("x")) for c in cells[1:]]
    return out


def test_doc_quotes_the_script_output_exactly():
    doc = open(DOC).read()
    quoted = doc.split("<!-- model:begin")[1].split("-->\n", 1)[1].split("<!-- model:end -->")[0]
    assert quoted.strip() == run().strip(), "docs/multinode.md is stale: paste `python3 docs/multinode_model.py` between the model markers"


def test_model_properties():
    out = run()
    ar = rows(out, "all_reduce")
    assert len(ar) == 11  # 1 KB .. 1 GB
    ring_bus = ar["1 G"][3]
    # A flat ring cannot beat the slower of NVLink (370) and the network (330 GB/s per node).
    assert ring_bus <= 330.0 + 1e-6
    # Hierarchical is NVLink-bound: its busbw at 1 GB is below 2(W-1)/W / (2(L-1)/L) x 370.
    assert ar["1 G"][5] <= 370 * (30 / 16) / (14 / 8) + 1e-6
    for size in ("16 M", "64 M", "256 M", "1 G"):
        assert ar[size][-1] > 1.0, size  # hier faster than the best flat shape
    for coll in ("reduce_scatter", "all_gather"):
        t = rows(out, coll)
        assert all(v[-1] > 1.0 for v in t.values()), coll
    # A worse network hurts the flat ring, not the NVLink-bound hierarchical path.
    slow = rows(run("--eta-net", "0.6"), "all_reduce")
    assert slow["1 G"][3] < ring_bus - 50
    assert abs(slow["1 G"][5] - ar["1 G"][5]) < 5
