"""scripts/test.sh's last line, `N passed, N failed[, N skipped]`: the counts are parsed from
what ctest, pytest and gtest/libFuzzer print (scripts/test_summary.sh), and summed."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CTEST = """Test project /x/build/ci
 1/60 Test  #1: unit ........   Passed    0.10 sec
97% tests passed, 2 tests failed out of 60

The following tests did not run:
\t 12 - gpu_only (Skipped)

The following tests FAILED:
\t 30 - mp_all_reduce (Failed)
"""
PYTEST = "....F..s\n=== short test summary info ===\n2 failed, 180 passed, 7 skipped, 1 error in 600.21s (0:10:00)\n"
GTEST = ("[==========] 120 tests ran.\n[  PASSED  ] 120 tests.\n[  PASSED  ] 30 tests.\n"
         "[  FAILED  ] 1 test, listed below:\nDone 51234 runs in 31 second(s)\nDone 77 runs in 30 second(s)\n")


def _run(script, files):
    for name, text in files.items():
        (files["_dir"] / name).write_text(text) if name != "_dir" else None
    p = subprocess.run(["bash", "-c", f"set -euo pipefail; . scripts/test_summary.sh; cd {files['_dir']}; {script}; summary"],
                       cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_counts_are_parsed_and_summed(tmp_path):
    lines = _run('span deps; sleep 1; span build; count_ctest ctest.out 8; count_pytest pytest.out 1; '
                 'count fresh-clone 1 0 0; count_gtest sanitizers gtest.out 1',
                 {"_dir": tmp_path, "ctest.out": CTEST, "pytest.out": PYTEST, "gtest.out": GTEST})
    # ctest 57/2/1, pytest 180/3/7, fresh clone 1/0/0, sanitizers 150 + 2 fuzz targets / 1
    assert lines[-2] == "== summary (passed/failed/skipped): ctest 57/2/1 pytest 180/3/7 fresh-clone 1/0/0 sanitizers 152/1/0"
    assert lines[-1] == "390 passed, 6 failed, 8 skipped"
    # each step's seconds, the build's second among them
    assert re.fullmatch(r"== seconds per step: deps 0 s, build [12] s, ctest 0 s, pytest 0 s, fresh-clone 0 s, "
                        r"sanitizers 0 s \(total [12] s\)", lines[-3]), lines[-3]


def test_a_step_without_counts_is_one_failure_and_no_skips_no_skip_field(tmp_path):
    lines = _run("count_ctest ctest.out 0; count_pytest pytest.out 2",
                 {"_dir": tmp_path, "ctest.out": "100% tests passed, 0 tests failed out of 5\n",
                  "pytest.out": "Traceback (most recent call last):\nKeyboardInterrupt\n"})
    assert lines[-1] == "5 passed, 1 failed"


def test_cmake4s_ctest_line_without_failures_is_counted(tmp_path):
    # CMake 4's ctest leaves out "0 tests failed": "100% tests passed out of N"
    lines = _run("count_ctest ctest.out 0",
                 {"_dir": tmp_path, "ctest.out": "100% tests passed out of 401\n\nLabel Time Summary:\n"})
    assert lines[-1] == "401 passed, 0 failed"
