#!/bin/bash
# GPU tier in one call (device machine): builds actorcc with CUDA, then runs gpu_worker groups
#   masked   : 2 ranks, rank0 sees GPU0 only, rank1 sees GPU1 only (+ timing table, timeout test)
#   permuted : 2 ranks, rank0 -> GPU1, rank1 -> GPU0 (kernels launched without PDL)
#   single   : 1 rank
# Logs go to $OUT (default ./gpu-out); a summary table is printed last; exit status is
# non-zero if anything failed.
set -u
source "$(dirname "$0")/build_tier.sh"

declare -A RC
run_cfg() {  # name devices cap worker-args... (settings in CFG_ENV)
  local name=$1 devs=$2 to=$3
  shift 3
  gpu_group "$name" "$devs" "$to" "${CFG_ENV:-}" "$@"
  RC[$name]=$?
}
# Time caps leave room for the later configurations within the device call's budget.
BUDGET="${ACTORCC_GPU_BUDGET:-400}"
cap() { local want=$1 reserve=$2 l; l=$(( $(left) - reserve )); [ $l -lt $want ] && want=$l; [ $want -lt 10 ] && want=10; echo $want; }
run_cfg masked 0,1 "$(cap 220 95)" --timeout-test
# (the permuted group also checks the kernels without programmatic dependent launch)
CFG_ENV="ACTORCC_CUDA_PDL=0" run_cfg permuted 1,0 "$(cap 80 40)" --quick --no-bench
CFG_ENV=
run_cfg single 0 "$(cap 40 3)" --quick --no-bench
grep -h "^TIME" "$OUT/gpu_masked.log" > "$OUT/timing.txt" 2>/dev/null

echo
echo "== timing (masked, 2 ranks; us per call, busbw GB/s)"
cat "$OUT/timing.txt"
echo
echo "== failures (first lines)"
grep -h "FAIL\|exception\|gpu_launch:\|CUDA error" "$OUT"/gpu_*.log | head -30
echo
echo "== summary"
printf "%-10s %-6s %s\n" config exit result
FAILED=0
for n in masked permuted single; do
  res=$(grep -h "^RESULT" "$OUT/gpu_$n.log" | tr '\n' ';')
  printf "%-10s %-6s %s\n" "$n" "${RC[$n]}" "${res:-no RESULT line}"
  [ "${RC[$n]}" = 0 ] || FAILED=1
done
exit $FAILED
