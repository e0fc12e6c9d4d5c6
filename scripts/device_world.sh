#!/usr/bin/env bash
# A machine with more than 2 GPUs (nvidia-h200-x4 / -x8) in one device call: builds the library,
# the GPU tier and actorcc-bench, runs the GPU tier's quick matrix with one rank per GPU (masked,
# then the rank -> GPU order reversed, without PDL), then scripts/bench_gpu.sh on every GPU
# (actorcc against NCCL in the same run). Caps keep it inside ~300 s of device time.
# `device_world.sh tune`: also the timing-only table of tests/gpu (every all-reduce algorithm
# and variant of gpu_worker --bench-only, actorcc alone) before actorcc-bench.
# Results: $OUT/world.tgz and $OUT/world-summary.txt.
set -u
RUN=world
source "$(dirname "$0")/device_steps.sh"
finish() {
  pack
  exit "$1"
}
N=$(nvidia-smi -L | wc -l)
nvidia-smi topo -m >"$W/topo.txt" 2>&1
devs=$(seq -s, 0 $((N - 1)))
rdevs=$(seq -s, $((N - 1)) -1 0)
step build 150 bash -c "cmake -S . -B '$B' -G Ninja -DCMAKE_BUILD_TYPE=Release -DACTORCC_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DACTORCC_TESTS=ON -DACTORCC_TOOLS=ON -DACTORCC_PYTHON=OFF && \
    cmake --build '$B' -j$(nproc) --target gpu_worker gpu_launch actorcc-bench" || { tail -30 "$W/build.log"; finish 1; }
G=$B/tests/gpu
step tier-masked 80 "$G/gpu_launch" --devices "$devs" --ids 32 --timeout 75 -- "$G/gpu_worker" --quick --no-bench
step tier-permuted 45 env ACTORCC_CUDA_PDL=0 "$G/gpu_launch" --devices "$rdevs" --ids 32 --timeout 40 -- "$G/gpu_worker" --quick --no-bench
grep -h "^RESULT\|FAIL" "$W"/tier-*.log | head -20
if [ "${1:-}" = tune ]; then
  step tune 240 env ACTORCC_TEST_TUNE_ONLY=1 "$G/gpu_launch" --devices "$devs" --ids 32 --timeout 235 -- "$G/gpu_worker" --bench-only
  grep -h "^TIME\|FAIL" "$W/tune.log" | head -120
fi
step bench 150 env OUT="$W/bench" BENCH="$B/tools/bench/actorcc-bench" CASE_TIMEOUT=40 HANG_TIMEOUT=35 bash scripts/bench_gpu.sh
finish 0
