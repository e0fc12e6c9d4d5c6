#!/bin/bash
# The NCCL path on real GPUs (device machine): actorcc-bench with the workers split into two
# virtual nodes (--nodes 2), so the group takes the backend a multi-node group (or a node whose
# GPUs cannot map each other) gets, NCCL for every collective. Every result is checked exactly
# (-c 1; the bench exits non-zero on any wrong element): each collective, out of place and in place, several dtypes and ops, 1 KiB - 64 MiB.
# Env: BENCH (the binary), OUT (logs, default ./nccl-path-out). Exit status: non-zero when any
# case failed or a worker did not report the NCCL backend.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/nccl-path-out}
BENCH=${BENCH:?set BENCH to the actorcc-bench binary}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
rc=0
n=0
check() {  # name, bench args...
  local name=$1
  shift
  n=$((n + 1))
  timeout 120 "$BENCH" --gpus 2 --nodes 2 --stagger 0 --impl actorcc -b 1K -e 64M -f 8 -n 5 -w 1 -c 1 --no-plot \
    --timeout 60 "$@" -J "$OUT/$name.json" >"$OUT/$name.log" 2>&1
  local r=$?
  local used=$(grep -c "using NCCL" "$OUT/$name.log")
  printf '%-34s exit %3d  NCCL-backend lines %d\n' "$name" "$r" "$used"
  if [ "$r" -ne 0 ] || [ "$used" -lt 1 ]; then rc=1; tail -5 "$OUT/$name.log"; fi
}
check all_reduce-float-sum --coll all_reduce -d float -o sum
check all_reduce-float-sum-inplace --coll all_reduce -d float -o sum --inplace
check all_reduce-bfloat16-avg --coll all_reduce -d bfloat16 -o avg
check all_reduce-int64-max --coll all_reduce -d int64 -o max
check all_reduce-half-min-inplace --coll all_reduce -d half -o min --inplace
check reduce_scatter-float-sum --coll reduce_scatter -d float -o sum
check reduce_scatter-int32-prod --coll reduce_scatter -d int32 -o prod
check all_gather-int8 --coll all_gather -d int8
check all_gather-double-inplace --coll all_gather -d double --inplace
check broadcast-float-root1 --coll broadcast -d float -r 1
# The backend's NCCL communicator (set up on a helper thread, bounded) against the bench's own
# NCCL, same run and the same library (the bench hands the baseline's library, PyTorch's, to
# actorcc's NCCL transport): the fallback must not be slower than NCCL itself.
check all_reduce-vs-nccl --coll all_reduce -d float -o sum --impl actorcc,nccl -n 50 -w 5
echo "nccl path: $n cases, $([ $rc = 0 ] && echo all passed || echo FAILURES)"
exit $rc
