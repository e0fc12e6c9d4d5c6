#!/usr/bin/env bash
# Reproduces the "slow state" of the LL one-shot (device machine, 2 GPUs): gpu_worker's
# --stall-test (induced skew of rank 1, then graph replays and eager calls; micro timings of the
# host-word read storm vs 1024 LL polls; the abort/timeout tests), then the bench's 256K..4M
# graph sweep with the per-GPU abort polling (default) and the old per-thread polling (0).
#   tests/gpu/stall.sh [build-dir] [bench-repeats]
set -u
B=${1:-build}
R=${2:-3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH="$PWD/$B:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
timeout 90 "$B/tests/gpu/gpu_launch" --devices 0,1 --ids 20 --timeout 80 -- "$B/tests/gpu/gpu_worker" --stall-test --timeout-test 2>&1 |
  grep -E "STALL|MICRO|abort test|timeout test|RESULT|rror|FAIL|xception"
for i in $(seq "$R"); do
  for v in 20 0; do
    ACTORCC_CUDA_ABORT_POLL_US=$v timeout 60 "$B/tools/bench/actorcc-bench" --gpus 2 --timeout 30 --launch actors --stagger 0.2 \
      -G 5 -b 256K -e 4M -f 2 -n 20 -w 5 --impl actorcc 2>&1 |
      awk -v v="$v" -v i="$i" '/^ +[0-9]+ +[0-9]+ +float/ {printf "BENCH run %d abort_poll_us=%-3s %9s B  mean %9s  p50 %9s  p99 %9s  wrong %s\n", i, v, $1, $5, $9, $10, $8} /rror|failed/ {print "BENCH", v, $0}'
  done
done
