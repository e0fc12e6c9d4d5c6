#!/bin/bash
# More ranks than GPUs (device machine, one call): 4, 3 and 8 ranks on the 2 GPUs of an x2
# machine, two to four processes per GPU (gpu_worker --shared-gpu: ACTORCC_CUDA_SHARE_GPU, the
# quick matrix, 20 graph replays). The GPU time-slices the processes of one GPU, so every
# exchange with a rank on the same GPU waits for a switch: slow, but the kernels' 3-8 rank paths
# (slot indexing, peer order, reduce-scatter strides, the planner's world scaling) run on real
# GPUs where no 4- or 8-GPU machine is lent. Logs: $OUT/gpu_shared<world>.log.
# Usage: tests/gpu/shared.sh [budget seconds, default 420]
set -u
source "$(dirname "$0")/build_tier.sh"
BUDGET="${1:-420}"
FAILED=0
run_shared() {  # world devices cap
  local w=$1 devs=$2 cap=$3
  [ "$(left)" -lt "$cap" ] && cap=$(left)
  if [ "$cap" -lt 20 ]; then echo "shared$w: skipped (no time left)"; FAILED=1; return; fi
  gpu_group "shared$w" "$devs" "$cap" "" --shared-gpu || FAILED=1
  grep -h '^RESULT' "$OUT/gpu_shared$w.log" | tr '\n' ';'
  echo
  grep -h "FAIL\|exception\|gpu_launch:\|CUDA error" "$OUT/gpu_shared$w.log" | head -10
}
run_shared 4 0,1,0,1 "${ACTORCC_SHARED4_S:-120}"
run_shared 3 0,1,0 "${ACTORCC_SHARED3_S:-120}"
run_shared 8 0,1,0,1,0,1,0,1 "${ACTORCC_SHARED8_S:-180}"
exit $FAILED
