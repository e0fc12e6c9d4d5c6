#!/usr/bin/env bash
# README's main command: builds actorcc-bench (once) and runs the all-reduce sweep on the GPUs
# this machine has, NCCL in the same run, or on 4 CPU-backend processes where there are none.
# Writes <date>-<host>.json and .png under bench/results/local/. Extra arguments go to the bench
# (for example: bash scripts/bench.sh --coll all_gather -G 10).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/main}
bash scripts/install_deps.sh
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib >/dev/null 2>&1 ||
  echo "(matplotlib could not be installed: the JSON is written, the plot is skipped)"
if [ ! -x "$BUILD/tools/bench/actorcc-bench" ] || [ -n "$(find src include tools -newer "$BUILD/tools/bench/actorcc-bench" -print -quit)" ]; then
  echo "== building actorcc-bench in $BUILD"
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DACTORCC_TESTS=OFF >"$BUILD.log" 2>&1 ||
    { tail -30 "$BUILD.log"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target actorcc-bench >>"$BUILD.log" 2>&1 || { tail -30 "$BUILD.log"; exit 1; }
fi
mkdir -p bench/results/local
out="bench/results/local/$(date -u +%Y%m%d-%H%M%S)-$(hostname -s)"
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -gt 0 ]; then
  export NCCL_NVLS_ENABLE=0  # never NVLink SHARP on shared machines
  sizes=(-b 1K -e 1G -f 4)
else
  sizes=(--ranks 4 -b 1K -e 1M -f 4)
fi
exec "$BUILD/tools/bench/actorcc-bench" "${sizes[@]}" -J "$out.json" "$@"
