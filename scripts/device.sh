#!/usr/bin/env bash
# The device machine's one entry point: builds once (CMake presets) and runs the phases named
# as arguments, in order, each under its own time cap and all under one budget, writing logs,
# JSON and a summary under $OUT (default ./device-out).
#
#   bash scripts/device.sh PHASE...        e.g.  build tier shared     |  mutations bench
#
# Phases (caps in seconds; a phase gets less when the budget runs short):
#   build       cmake --preset gpu (library, GPU tier, actorcc-bench), ~3 min on 16 cores
#   tier        the GPU tier on every GPU, one rank each (1 GPU: one rank; 2+: masked, then
#               permuted without PDL, with the timeout/abort tests)
#   shared      2, 3, 4 and 8 ranks sharing the GPUs (ACTORCC_CUDA_SHARE_GPU=1): the kernels'
#               3-8 rank paths where fewer GPUs are lent (gpu_worker --shared-gpu); on one GPU
#               4 ranks run every 2nd case, 8 ranks every 6th. shared2 ... shared8: one world
#               (caps 100, 130, 150, 200)
#   vnodes      two virtual nodes (ACTORCC_NODE_ID per rank): the NCCL path, every collective
#               checked exactly (needs 2+ GPUs: NCCL refuses ranks sharing one)
#   mutations   the test-only build (preset gpu-mutations) with each kernel mutation of
#               src/common/mutation.hpp and without: gpu_worker --mutation-check on 3 ranks and
#               actorcc-bench on 3 ranks (route twoshot forced: the mutations live in the
#               tile-reduce kernels, not in the LL/LL128 routes the planner picks up to 64 MiB)
#               must both report wrong results for every mutation and none unmutated;
#               mutations.txt holds the counts
#   bench       actorcc-bench: against NCCL (plain and symmetric windows) on 2+ GPUs, eager and
#               CUDA graphs; on 1 GPU the actorcc side alone, ranks sharing it, with checks
#   timeout     (2+ GPUs) the abort/timeout and stall tests of gpu_worker
#   tune        (2+ GPUs) gpu_worker's timing table of every all-reduce route and variant
#   p2p         send/recv, batches, all_to_all(_v), reduce, gather, scatter on GPUs from Python
#               (tests/python/test_gpu_p2p.py: ranks sharing GPU 0, then one GPU each and the NCCL
#               path on 2+ GPUs) and the torch.distributed backend (test_torch_backend.py); builds
#               the library and the extension (preset gpu with ACTORCC_PYTHON=ON), ~7 min on 1 GPU:
#               run it alone with DEVICE_BUDGET=590
#   p2pnv       (<= 60 s of tests) send/recv, batches and all_to_all_v on the NVLink path, 2 ranks
#               sharing GPU 0, every dtype, a captured batch, and a count mismatch failing on both ends
#               (tests/python/test_gpu_p2p.py); reuses the build phase's folder and builds only
#               the extension (actorcc_py_pkg) on top
#   all         build tier shared vnodes mutations bench p2p
# Env: OUT, DEVICE_BUDGET (seconds for the whole call, default 530: one device call is <= 9 min).
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/device-out}
BUDGET=${DEVICE_BUDGET:-530}
T0=$(date +%s)
mkdir -p "$OUT/logs"
SUMMARY=$OUT/summary.txt
# Never multicast objects (NVLS): forbidden on these machines. The one place that says so.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
FAILED=0

left() { echo $((BUDGET - ($(date +%s) - T0))); }

# step NAME CAP COMMAND...: runs COMMAND under `timeout` (CAP, or what the budget leaves), its
# output in $OUT/logs/NAME.log, and appends "NAME exit RC Ns (cap C)" to the summary. The one
# run-with-timeout helper of the device runs.
step() {
  local name=$1 cap=$2 t rc l
  shift 2
  l=$(($(left) - 5))
  [ "$cap" -gt "$l" ] && cap=$l
  if [ "$cap" -lt 15 ]; then
    printf '%-30s SKIPPED (budget spent)\n' "$name" | tee -a "$SUMMARY"
    FAILED=1
    return 124
  fi
  t=$(date +%s)
  timeout -k 5 "$cap" "$@" >"$OUT/logs/$name.log" 2>&1
  rc=$?
  printf '%-30s exit %3d  %4ds (cap %d)\n' "$name" "$rc" "$(($(date +%s) - t))" "$cap" | tee -a "$SUMMARY"
  return $rc
}
# The tier's verdict lines and first failures of a log.
tier_lines() { grep -h "^RESULT\|FAIL\|exception\|gpu_launch:\|CUDA error" "$OUT/logs/$1.log" | head -12; }

ensure_build() {  # preset: builds it once per machine (later calls reuse the build folder)
  local p=$1
  [ -x "build/$p/tests/gpu/gpu_worker" ] && [ -x "build/$p/tools/bench/actorcc-bench" ] && return 0
  step "build-$p" 300 bash -c "cmake --preset $p && cmake --build --preset $p -j$(nproc)" ||
    { tail -40 "$OUT/logs/build-$p.log"; FAILED=1; return 1; }
}
G=build/gpu/tests/gpu
BENCH=build/gpu/tools/bench/actorcc-bench
devlist() {  # n ranks -> comma list of GPUs, round-robin
  local n=$1 i s=
  for ((i = 0; i < n; i++)); do s+="${s:+,}$((i % NGPU))"; done
  echo "$s"
}
group() {  # name cap devices env worker-args...: one gpu_worker per entry of devices (a comma list)
  local name=$1 cap=$2 devs=$3 envs=$4
  shift 4
  # shellcheck disable=SC2086  # envs: words on purpose
  step "$name" "$cap" env $envs "$G/gpu_launch" --devices "$devs" --ids 32 --timeout $((cap - 5)) -- \
    "$G/gpu_worker" "$@" || FAILED=1
  tier_lines "$name"
}

phase_build() { ensure_build gpu; }

phase_tier() {
  ensure_build gpu || return
  if [ "$NGPU" -ge 2 ]; then
    group tier-masked 200 "$(devlist "$NGPU")" "" --timeout-test --no-bench
    # rank r on GPU NGPU-1-r, kernels launched without programmatic dependent launch
    group tier-permuted 90 "$(seq -s, $((NGPU - 1)) -1 0)" "ACTORCC_CUDA_PDL=0" --quick --no-bench
  else
    group tier-1rank 90 0 "" --no-bench
  fi
}

# shared W: W ranks round-robin over the GPUs, the quick matrix (--shared-gpu); where W ranks
# share one GPU the larger worlds sample the matrix (ACTORCC_TEST_SAMPLE: every K-th case, a
# different residue per world) to fit a device call. Skipped where W GPUs exist (phase tier).
phase_shared() {
  ensure_build gpu || return
  local w=$1 cap sample
  [ "$w" -le "$NGPU" ] && return
  case $w in 2) cap=100 sample=1 ;; 3) cap=130 sample=1 ;; 4) cap=150 sample=2 ;; *) cap=200 sample=6 ;; esac
  [ "$NGPU" -ge 2 ] && sample=1
  group "shared-$w" "$cap" "$(devlist "$w")" "ACTORCC_TEST_SAMPLE=$sample" --shared-gpu
}

phase_vnodes() {
  ensure_build gpu || return
  if [ "$NGPU" -lt 2 ]; then
    printf '%-30s SKIPPED (needs 2+ GPUs: NCCL refuses ranks sharing one)\n' vnodes | tee -a "$SUMMARY"
    return
  fi
  local name args
  while read -r name args; do
    # shellcheck disable=SC2086
    step "vnodes-$name" 120 "$BENCH" --gpus 2 --nodes 2 --stagger 0 --impl actorcc -b 1K -e 64M -f 8 -n 5 -w 1 -c 1 \
      --no-plot --timeout 60 $args -J "$OUT/vnodes-$name.json" || FAILED=1
    grep -q "using NCCL" "$OUT/logs/vnodes-$name.log" || { echo "vnodes-$name: no worker reported the NCCL backend"; FAILED=1; }
  done <<'EOF'
all_reduce-float-sum --coll all_reduce -d float -o sum
all_reduce-half-min-inplace --coll all_reduce -d half -o min --inplace
all_reduce-bfloat16-avg --coll all_reduce -d bfloat16 -o avg
reduce_scatter-int32-prod --coll reduce_scatter -d int32 -o prod
all_gather-int8 --coll all_gather -d int8
broadcast-float-root1 --coll broadcast -d float -r 1
EOF
}

phase_mutations() {
  ensure_build gpu-mutations || return
  local m gm=build/gpu-mutations
  local table=$OUT/mutations.txt
  printf '%-11s %-40s %s\n' mutation "gpu tier (3 ranks, --mutation-check)" "actorcc-bench (3 ranks, half sum, twoshot, 1-16 MiB)" >"$table"
  for m in none shift_tile drop_rank half_acc; do
    local n=3
    step "mut-$m-tier" 75 env ACTORCC_TEST_MUTATION=$m "$gm/tests/gpu/gpu_launch" --devices "$(devlist $n)" --ids 32 \
      --timeout 70 -- "$gm/tests/gpu/gpu_worker" --shared-gpu --mutation-check
    local trc=$?
    step "mut-$m-bench" 45 env ACTORCC_TEST_MUTATION=$m ACTORCC_CUDA_SHARE_GPU=1 "$gm/tools/bench/actorcc-bench" \
      --gpus $n --impl actorcc --algo twoshot --stagger 0 -b 1M -e 16M -f 4 -n 3 -w 1 -c 1 -d half -o sum --no-plot --timeout 35 \
      -J "$OUT/mut-$m.json"
    local brc=$?
    local tier bench
    tier="exit $trc; $(grep -h '^RESULT' "$OUT/logs/mut-$m-tier.log" | awk '{c+=$7; f+=$9} END {printf "%d cases, %d failures", c, f}')"
    bench="exit $brc; wrong: $(grep -ho 'out of bounds values : [0-9]*' "$OUT/logs/mut-$m-bench.log" | awk '{printf "%s ", $NF}')"
    printf '%-11s %-40s %s\n' "$m" "$tier" "$bench" >>"$table"
    # Unmutated must pass both; each mutation must fail both.
    if [ "$m" = none ]; then
      [ "$trc" = 0 ] && [ "$brc" = 0 ] || FAILED=1
    else
      [ "$trc" != 0 ] && [ "$brc" != 0 ] || { echo "mutation $m NOT caught (tier $trc, bench $brc)"; FAILED=1; }
    fi
  done
  cat "$table"
}

phase_bench() {
  ensure_build gpu || return
  local tag
  tag=$(date -u +%Y-%m-%d)-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr -c 'A-Za-z0-9\n' '_' | sed 's/_*$//')-x$NGPU
  mkdir -p "$OUT/bench"
  if [ "$NGPU" -ge 2 ]; then
    step bench-eager 240 "$BENCH" -b 1K -e 1G -f 4 -w 5 --gpus "$NGPU" --launch actors --stagger 1 --impl actorcc,nccl \
      --nccl-symmetric -J "$OUT/bench/$tag-actors-eager.json" || FAILED=1
    step bench-graph 240 "$BENCH" -b 1K -e 1G -f 4 -w 5 --gpus "$NGPU" --launch actors --stagger 1 --impl actorcc,nccl \
      --nccl-symmetric -G 5 -J "$OUT/bench/$tag-actors-graph.json" || FAILED=1
  else
    # One GPU: the actorcc side alone (NCCL refuses ranks sharing a GPU), every size checked;
    # times here are time-sliced, so they are no performance figures.
    step bench-shared-2-eager 50 env ACTORCC_CUDA_SHARE_GPU=1 "$BENCH" -b 1K -e 256M -f 8 -n 5 -w 1 --gpus 2 \
      --impl actorcc --stagger 0 --timeout 40 -d half -J "$OUT/bench/$tag-shared2-eager.json" || FAILED=1
    step bench-shared-4-graph 50 env ACTORCC_CUDA_SHARE_GPU=1 "$BENCH" -b 1K -e 64M -f 8 -n 5 -w 1 --gpus 4 \
      --impl actorcc --stagger 0 --timeout 40 -G 2 -d bfloat16 -o avg -J "$OUT/bench/$tag-shared4-graph.json" || FAILED=1
  fi
  grep -h "out of bounds" "$OUT"/logs/bench-*.log
}

phase_p2p() {
  step build-python 300 bash -c "cmake --preset gpu -DACTORCC_PYTHON=ON >/dev/null &&
      cmake --build --preset gpu -j$(nproc) --target actorcc_py_pkg" ||
    { tail -40 "$OUT/logs/build-python.log"; FAILED=1; return; }
  step py-gpu-p2p 480 env PYTHONPATH="$ROOT/build/gpu/python/pkg" python3 -m pytest -q -p no:cacheprovider \
    tests/python/test_gpu_p2p.py tests/python/test_torch_backend.py || FAILED=1
  tail -25 "$OUT/logs/py-gpu-p2p.log"
}

phase_p2pnv() {
  ensure_build gpu || return
  step build-python-ext 240 bash -c "cmake -S . -B build/gpu -DACTORCC_PYTHON=ON >/dev/null &&
      cmake --build build/gpu -j$(nproc) --target actorcc_py_pkg" ||
    { tail -40 "$OUT/logs/build-python-ext.log"; FAILED=1; return; }
  step py-gpu-p2p-nvlink 60 env PYTHONPATH="$ROOT/build/gpu/python/pkg" python3 -m pytest -q -p no:cacheprovider \
    "tests/python/test_gpu_p2p.py::test_nvlink_path_sharing_one_gpu[2]" \
    "tests/python/test_gpu_p2p.py::test_nvlink_transfer_mismatch_fails_on_both_ends[count]" || FAILED=1
  tail -5 "$OUT/logs/py-gpu-p2p-nvlink.log"
}

phase_tune() {
  ensure_build gpu || return
  [ "$NGPU" -ge 2 ] || { printf '%-30s SKIPPED (needs 2+ GPUs)\n' tune | tee -a "$SUMMARY"; return; }
  group tune 300 "$(devlist "$NGPU")" "ACTORCC_TEST_TUNE_ONLY=1" --bench-only
  grep -h "^TIME" "$OUT/logs/tune.log" >"$OUT/timing.txt"
}

phase_timeout() {
  ensure_build gpu || return
  [ "$NGPU" -ge 2 ] || { printf '%-30s SKIPPED (needs 2+ GPUs)\n' timeout | tee -a "$SUMMARY"; return; }
  group timeout-stall 120 0,1 "" --stall-test --timeout-test
}

[ $# -gt 0 ] || { sed -n '2,37p' "$0"; exit 2; }
phases=("$@")
[ "$*" = all ] && phases=(build tier shared vnodes mutations bench p2p)
{
  echo "== device.sh ${phases[*]}: $NGPU GPU(s), budget ${BUDGET}s, $(date -u +%FT%TZ)"
  nvidia-smi -L 2>&1
} | tee -a "$SUMMARY"
nvidia-smi topo -m >"$OUT/topo.txt" 2>&1
for p in "${phases[@]}"; do
  case $p in
    build | tier | vnodes | mutations | bench | timeout | tune | p2p | p2pnv) "phase_$p" ;;
    shared) for w in 2 3 4 8; do phase_shared $w; done ;;
    shared2 | shared3 | shared4 | shared8) phase_shared "${p#shared}" ;;
    *) echo "unknown phase '$p'"; exit 2 ;;
  esac
done
echo "== summary ($(($(date +%s) - T0)) s)"
cat "$SUMMARY"
exit $FAILED
