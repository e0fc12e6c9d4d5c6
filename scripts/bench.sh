#!/usr/bin/env bash
# README's main command: builds actorcc-bench (once) and runs the all-reduce sweep on the GPUs
# this machine has, NCCL in the same run, or on 4 CPU-backend processes where there are none.
# Writes <date>-<host>.json and .png under bench/results/local/. Extra arguments go to the bench
# (for example: bash scripts/bench.sh --coll all_gather -G 10).
#
# Every step says what it does before doing it (what is installed, what is built, which sizes
# run), so a first run on a fresh machine never sits silent for minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "== $*"; }
. scripts/build_progress.sh
. scripts/build_folder.sh

# GPUS=0 runs the CPU sweep on a machine with GPUs too (CI does, in scripts/fresh_clone_bench.sh).
gpus=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}
if [ "${gpus:-0}" -gt 0 ]; then
  cuda=ON
else
  # Without a GPU only the CPU backend can run: skip the CUDA kernels (a much shorter build).
  cuda=OFF
fi
BUILD=${BUILD:-$(shared_build_folder $cuda)}
use_folder_generator "$BUILD"

bash scripts/install_deps.sh
if ! python3 -c "import matplotlib" 2>/dev/null; then
  say "installing matplotlib with pip (draws the PNG; the JSON is written without it)"
  python3 -m pip install --disable-pip-version-check -q matplotlib ||
    echo "(matplotlib could not be installed: the JSON is written, the plot is skipped)"
fi

bin="$BUILD/tools/bench/actorcc-bench"
if [ ! -x "$bin" ] || [ -n "$(find src include tools -newer "$bin" -print -quit)" ]; then
  log="$BUILD.log"
  mkdir -p "$BUILD"
  if [ -f "$BUILD/CMakeCache.txt" ]; then
    # made by scripts/test.sh or an earlier run: its objects are reused, only what changed compiles
    say "building actorcc-bench in $BUILD (CUDA backend $cuda; reusing the build there: only what changed is compiled; full log: $log)"
    : >"$log"
  else
    say "building actorcc-bench in $BUILD (CUDA backend $cuda; a first build takes minutes; full log: $log)"
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DACTORCC_TESTS=OFF -DACTORCC_CUDA=$cuda >"$log" 2>&1 ||
      { tail -30 "$log"; exit 1; }
  fi
  if ! cmake --build "$BUILD" -j"$(nproc)" --target actorcc-bench 2>&1 | tee -a "$log" | build_progress; then
    tail -30 "$log"
    exit 1
  fi
fi

mkdir -p bench/results/local
out="bench/results/local/$(date -u +%Y%m%d-%H%M%S)-$(hostname -s)"
if [ "${gpus:-0}" -gt 0 ]; then
  export NCCL_NVLS_ENABLE=0  # never NVLink SHARP on shared machines
  sizes=(-b 1K -e 1G -f 4)
  say "running the all-reduce sweep on $gpus GPU(s), actorcc and NCCL (one table row per size as it finishes)"
else
  sizes=(--ranks 4 -b 1K -e 1M -f 4)
  say "no GPU: running the all-reduce sweep on 4 CPU-backend processes (one table row per size as it finishes)"
fi
"$bin" "${sizes[@]}" -J "$out.json" "$@"
say "done: $out.json$([ -f "$out.png" ] && echo " and $out.png"); table: python3 bench/table.py bench/results/local"
