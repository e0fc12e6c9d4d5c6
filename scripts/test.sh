#!/usr/bin/env bash
# README's test command (and .ci/run's): installs what the build and the tests need, builds the
# library, the C++ tests, actorcc-bench and the Python extension in ONE CMake build (through
# pip, so the installed package is the one tested), then runs ctest (unit, multiprocess, bench
# CLI, fault injection), pytest (bindings, multiprocess, Ray, doctor, bench CLI, reliability,
# the examples), in a fresh clone of this checkout the README's main command on the CPU backend
# (scripts/bench.sh with a short size range, so that a new user's first command cannot break
# unnoticed), then the sanitizer tier (scripts/fuzz.sh: ASan + UBSan over the C++ unit and fault
# tests, and each libFuzzer target for FUZZ_SECONDS, default 10).
# Its last line, whatever happened, is the count of what ran: `N passed, N failed` (and
# `, N skipped` where tests were skipped), summed from ctest's, pytest's and the sanitizer
# tier's own counts (each fuzz target and the fresh-clone check count as one; a step that fails
# before it could count anything counts as one failure); the line above it gives the parts.
set -euo pipefail
cd "$(dirname "$0")/.."
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
. scripts/test_summary.sh
trap summary EXIT
bash scripts/install_deps.sh
bash scripts/ci_python_deps.sh
span deps
. scripts/build_progress.sh
. scripts/build_folder.sh
# The CUDA backend where nvcc is (where CMake's check_language(CUDA) finds one: CUDACXX, PATH,
# /usr/local/cuda; ACTORCC_CUDA=OFF skips it), in the folder scripts/bench.sh uses with the same
# setting.
if [ -z "${ACTORCC_CUDA:-}" ]; then
  if [ -n "${CUDACXX:-}" ] || command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    ACTORCC_CUDA=ON
  else
    ACTORCC_CUDA=OFF
  fi
fi
BUILD=${BUILD:-$(shared_build_folder "$ACTORCC_CUDA")}
use_folder_generator "$BUILD"
log="$BUILD.log"
mkdir -p "$BUILD"
echo "== building the library, the C++ tests, actorcc-bench and the Python package (pip install, build folder $BUILD;" \
  "the first build takes many minutes; full log: $log)"
if ! python3 -m pip install -v --no-build-isolation --disable-pip-version-check \
  -C build-dir="$BUILD" -C cmake.define.ACTORCC_TESTS=ON -C cmake.define.ACTORCC_TOOLS=ON \
  -C cmake.define.ACTORCC_CUDA="$ACTORCC_CUDA" . 2>&1 | tee "$log" | build_progress; then
  tail -40 "$log"
  count build 0 1 0
  exit 1
fi
span build
tmp=${TMPDIR:-/tmp}
scratch_before=$(find "$tmp" -maxdepth 1 -name 'bench-cli-*' | wc -l)
echo "== ctest"
out="$BUILD/ctest.out"
rc=0
ctest --test-dir "$BUILD" --output-on-failure --timeout 900 2>&1 | tee "$out" || rc=$?
count_ctest "$out" "$rc"
[ "$rc" = 0 ] || exit "$rc"
# The CPU matrices' case counts by call, dtype, op, world and size band (tests/common/tally.hpp),
# under the name of each test (the collective matrix and the p2p matrix, each world).
grep -h "^COUNT-OF\|^COUNT-BY\|^COUNT-TOTAL" "$BUILD/Testing/Temporary/LastTest.log" || true
echo "== pytest"
# Run from outside the source tree so `import actorcc` is the installed package.
export ACTORCC_BENCH="$PWD/$BUILD/tools/bench/actorcc-bench"
out="$BUILD/pytest.out"
rc=0
# One pytest run at a time: two side by side (the Ray tests beside the others) saved a third of
# the time, but under that load tests that name a culprit or time a shutdown failed.
python3 -m pytest -q -p no:cacheprovider --rootdir "$PWD" "$PWD/tests/python" 2>&1 | tee "$out" || rc=$?
count_pytest "$out" "$rc"
[ "$rc" = 0 ] || exit "$rc"
scratch_after=$(find "$tmp" -maxdepth 1 -name 'bench-cli-*' | wc -l)
if [ "$scratch_after" -gt "$scratch_before" ]; then
  echo "FAILED: the tests left $((scratch_after - scratch_before)) bench-cli-* folder(s) in $tmp" >&2
  count leftovers 0 1 0
  exit 1
fi
if bash scripts/fresh_clone_bench.sh; then count fresh-clone 1 0 0; else count fresh-clone 0 1 0; exit 1; fi
echo "== sanitizers and fuzzing"
out="$BUILD/fuzz.out"
rc=0
bash scripts/fuzz.sh 2>&1 | tee "$out" || rc=$?
count_gtest sanitizers "$out" "$rc"
exit "$rc"
