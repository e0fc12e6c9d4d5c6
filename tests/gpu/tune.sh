#!/bin/bash
# Tuning run (device machine, one call, ~5 min): builds like run.sh, then
#   masked   : 2 ranks, one GPU each: full correctness matrix (every forced algorithm, incl.
#              twoshot_pipe with many tiles per CTA mixed with LL by the planner) + timing table
#   permuted : 2 ranks, swapped GPUs, quick matrix, no PDL (time permitting)
# Logs in $OUT; the all-reduce timing rows >= 1 MiB are printed last.
set -u
BUDGET="${ACTORCC_GPU_BUDGET:-310}"
source "$(dirname "$0")/build_tier.sh"
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
TO=$(( $(left) - 45 )); [ $TO -lt 30 ] && TO=30
t=$(date +%s)
timeout -k 5 $TO "$BIN/gpu_launch" --devices 0,1 --ids 24 --timeout $((TO - 5)) -- "$BIN/gpu_worker" > "$OUT/gpu_masked.log" 2>&1
echo "masked: exit $? in $(( $(date +%s) - t )) s (cap $TO)"
TO=$(( $(left) - 3 ))
if [ $TO -ge 20 ]; then
  t=$(date +%s)
  timeout -k 5 $TO env ACTORCC_CUDA_PDL=0 "$BIN/gpu_launch" --devices 1,0 --ids 24 --timeout $((TO - 5)) -- "$BIN/gpu_worker" --quick --no-bench > "$OUT/gpu_permuted.log" 2>&1
  echo "permuted: exit $? in $(( $(date +%s) - t )) s (cap $TO)"
fi
grep -h "^TIME" "$OUT/gpu_masked.log" > "$OUT/timing.txt" 2>/dev/null
echo "== failures (first lines)"
grep -h "FAIL\|exception\|gpu_launch:\|CUDA error" "$OUT"/gpu_*.log | head -20
grep -h "^RESULT\|^all_reduce\[\|^plan" "$OUT"/gpu_*.log
echo "== all-reduce timing >= 1 MiB (us per call; busbw GB/s)"
awk '$4>=1048576 && $2!="all_gather" && $2!="reduce_scatter" && $2!="broadcast" {printf "%-15s %-13s %10s %9s %9s %7s\n",$2,$3,$4,$5,$6,$7}' "$OUT/timing.txt"
