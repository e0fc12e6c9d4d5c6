#!/usr/bin/env bash
# README's test command (and .ci/run's): installs what the build and the tests need, builds the
# library, the C++ tests, actorcc-bench and the Python extension in ONE CMake build (through
# pip, so the installed package is the one tested), then runs ctest (unit, multiprocess, bench
# CLI, fault injection) and pytest (bindings, multiprocess, Ray, doctor, bench CLI, reliability),
# then the sanitizer tier (scripts/fuzz.sh: ASan + UBSan over the C++ unit and fault tests, and
# each libFuzzer target for FUZZ_SECONDS, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/ci}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
bash scripts/install_deps.sh
bash scripts/ci_python_deps.sh
echo "== building (pip install, build folder $BUILD)"
python3 -m pip install --no-build-isolation --disable-pip-version-check -q \
  -C build-dir="$BUILD" -C cmake.define.ACTORCC_TESTS=ON -C cmake.define.ACTORCC_TOOLS=ON .
echo "== ctest"
ctest --test-dir "$BUILD" --output-on-failure --timeout 900
echo "== pytest"
# Run from outside the source tree so `import actorcc` is the installed package.
export ACTORCC_BENCH="$PWD/$BUILD/tools/bench/actorcc-bench"
python3 -m pytest -q -p no:cacheprovider --rootdir "$PWD" "$PWD/tests/python"
echo "== sanitizers and fuzzing"
bash scripts/fuzz.sh
