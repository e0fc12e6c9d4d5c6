#!/bin/bash
# Tuning run (device machine, one call): builds like run.sh, then
#   timing   : 2 ranks, one GPU each: the timing table alone (--bench-only), first, so a hang in a
#              correctness case cannot cost the measurements
#   masked   : the full correctness matrix (every forced algorithm, the pipelined two-shot with
#              many tiles per CTA and the streaming one-shot with a tiny ring, each mixed with LL
#              by the planner), no timing
#   permuted : swapped GPUs, quick matrix, no PDL (time permitting)
# Logs in $OUT; the all-reduce timing rows are printed last.
set -u
BUDGET="${ACTORCC_GPU_BUDGET:-420}"
source "$(dirname "$0")/build_tier.sh"
group() {  # name devices cap env worker-args...
  [ "$3" -lt 20 ] && { echo "$1: skipped (no time left)"; return; }
  gpu_group "$@"
}
TO=$(( $(left) - 150 )); [ $TO -gt 260 ] && TO=260
group timing 0,1 "$TO" "ACTORCC_TEST_TUNE_ONLY=1" --bench-only
group masked 0,1 "$(( $(left) - 50 ))" "" --no-bench
group permuted 1,0 "$(( $(left) - 3 ))" "ACTORCC_CUDA_PDL=0" --quick --no-bench
grep -h "^TIME" "$OUT/gpu_timing.log" > "$OUT/timing.txt" 2>/dev/null
echo "== failures (first lines)"
grep -h "FAIL\|exception\|gpu_launch:\|CUDA error" "$OUT"/gpu_*.log | head -20
grep -h "^RESULT\|^all_reduce\[\|^plan" "$OUT"/gpu_*.log
echo "== all-reduce timing (us per call; busbw GB/s)"
awk '$2!="all_gather" && $2!="reduce_scatter" && $2!="broadcast" {printf "%-15s %-15s %10s %9s %9s %7s\n",$2,$3,$4,$5,$6,$7}' "$OUT/timing.txt"
