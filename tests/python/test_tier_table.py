"""Every folder under tests/ is in docs/design.md's test tier table (its folders column), and every
folder the table names exists, so a new kind of test says where and when it runs."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DESIGN = os.path.join(ROOT, "docs", "design.md")


def tier_folders():
    with open(DESIGN) as f:
        text = f.read()
    section = text.split("## Test tiers", 1)[1].split("\n## ", 1)[0]
    folders = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("tier", "---"):
            folders.update(re.findall(r"`([^`]+)`", cells[1]))
    return folders


def test_every_test_folder_has_a_tier():
    named = tier_folders()
    assert named, "the test tier table of docs/design.md was not found"
    present = {f"tests/{d}" for d in os.listdir(os.path.join(ROOT, "tests"))
               if os.path.isdir(os.path.join(ROOT, "tests", d)) and d != "__pycache__"}
    assert not present - named, "tests/ folders missing from the tier table: " + ", ".join(sorted(present - named))
    missing = sorted(f for f in named if not os.path.isdir(os.path.join(ROOT, f)))
    assert not missing, "tier table folders that do not exist: " + ", ".join(missing)
