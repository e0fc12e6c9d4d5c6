#!/usr/bin/env bash
# The device machine's one entry point: builds once (CMake presets) and runs the phases named
# as arguments, in order, each under its own time cap and all under one budget, writing logs,
# JSON and a summary under $OUT (default ./device-out); at the end everything but summary.txt
# is packed into $OUT/results.tgz (tar -xzf to read the logs).
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
#               (caps 130, 130, 150, 200)
#   evidence    the evidence matrix (gpu_worker --evidence S: every dtype x op of all_reduce and
#               reduce_scatter, every dtype of all_gather and broadcast, misaligned and in place
#               in turn, sizes growing per pass) for 2, 3, 4 and 8 ranks sharing the GPUs, each
#               world time-capped (14-20 s of cases, caps 28-35 s: <= 125 s in all); the case
#               counts by collective, dtype, op, world and size band in $OUT/counts/ and
#               counts.txt. evidence2 ... evidence8: one world
#   vnodes      two virtual nodes (ACTORCC_NODE_ID + NCCL_HOSTID) on the GPUs lent, ranks
#               sharing them: the hierarchical GPU backend on 2 x 1 and 2 x 2 ranks, the
#               evidence matrix (every collective x dtype x op) eager and in a CUDA graph,
#               checked bench sweeps, a kill and a hang case, then actorcc against flat NCCL
#               over the same ranks (actorcc-bench --nodes 2): ~250 s on one GPU
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
#   errors      the GPU failure cases of tests/gpu/async_errors.cu, 2 ranks (sharing GPU 0 where
#               only one is lent): a rank that stops calling (stall), closes its communicator
#               (leave), aborts (abort), is SIGKILLed (kill) while the other's kernel waits for
#               it; the other must raise from check(), synchronize() and its next call, naming
#               it, within ~1.5 s of its kernel's timeout (stall, 5 runs) or within 3 s under
#               a 30 s timeout (leave, abort, kill). ~40 s
#   mismatch    the kernels' call check (gpu_async_errors mismatch): 2 ranks sharing GPU 0, one
#               group per kind of disagreement (count on each all-reduce route and across
#               routes, count 0 against a count, dtype, op, root, collective, barrier); every
#               rank must raise within 5 s
#               naming both calls, and each group's matching all_reduce must be exact. <= 45 s
#   mismatchcost  what the call check costs: actorcc-bench all_reduce 4 KB and 1 MB, eager and
#               CUDA graphs, with it (default) and without (ACTORCC_CUDA_CALL_CHECK=0), 2 ranks
#               (one GPU each where 2 are lent, else sharing GPU 0: then time-sliced, so only a
#               gross cost shows); prints the time and p50 of each pair and the difference. <= 80 s
#   sanitize    compute-sanitizer over gpu_async_errors' exact collective matrix: memcheck on 1
#               rank (copy kernels), memcheck and racecheck on 2 ranks sharing GPU 0 (the NVLink
#               routes). <= 55 s
#   p2pnv       (<= 60 s of tests) send/recv, batches and all_to_all_v on the NVLink path, 2 ranks
#               sharing GPU 0, every dtype, a captured batch, and a count mismatch failing on both ends
#               (tests/python/test_gpu_p2p.py); reuses the build phase's folder and builds only
#               the extension (actorcc_py_pkg) on top
#   torch       (<= 90 s) the torch.distributed backend against torch's NCCL backend in the same
#               2 processes (sharing GPU 0 where one is lent: ACTORCC_CUDA_SHARE_GPU=1, a
#               different NCCL_HOSTID per rank): the collective matrix, DDP (plain and with a comm
#               hook) and FSDP2 against a single-process reference, the time of a DDP step and
#               of dist.all_reduce from 4 KiB to 16 MiB (tests/python/torch_device.py; JSON in
#               torch.json); then (<= 60 s) torch.cuda.graph capture of all_reduce (blocking, and
#               async_op waited on from another stream), all_gather_into_tensor,
#               reduce_scatter_tensor, broadcast and batch_isend_irecv on "actorcc", 2 ranks sharing
#               GPU 0, each graph replayed 1000 times with fresh inputs and checked
#               (tests/python/test_torch_graphs.py); reuses the build phase's folder and builds
#               only the extension
#   torchbench  (<= 1 s a variant's round + 120 s) bench/torch_bench.py: dist.all_reduce per call (sync, async_op, CUDA
#               events, CUDA graph) 4 KiB to 16 MiB, world 1 on GPU 0: "actorcc", "nccl", "nccl"
#               with actorcc's libnccl.so.2 preloaded (where built) and the raw
#               actorcc.Communicator call and each libnccl's own ncclAllReduce (ctypes),
#               every variant's process alive at once, taking turns round by round
#               (TORCHBENCH_ROUNDS, 40: each figure the median of the rounds, each pair's
#               ratios round by round), or TORCHBENCH_TRIALS=K fresh processes per trial in
#               rotating order (the spread between processes); TORCHBENCH_VARIANTS (all
#               three), TORCHBENCH_CPUS (auto: each rank bound to CPUs of its own; none),
#               TORCHBENCH_TAG (the JSON's name: world1-TAG); then world 2 sharing GPU 0
#               (actorcc only, few calls: time-sliced; TORCHBENCH_SHARED=0 leaves it out).
#               JSON, PNG and the table in $OUT/torchbench/
#   ncclconf    (<= 4 min) the NCCL-ABI library's conformance test (tests/nccl/nccl_abi_test.c,
#               compiled against the real nccl.h) on the CUDA backend, ranks sharing GPU 0:
#               2 and 4 processes (every collective x dtype x op, p2p batches, split, nonblocking
#               init), an abort from another thread while a kernel waits, a SIGKILLed rank seen
#               through ncclCommGetAsyncError, ranks that disagree on a call, a stalled rank,
#               elastic membership (4 processes: planned shrink, a SIGKILLed rank then
#               NCCL_SHRINK_ABORT, revoke, grow back with new processes, the matrix exact on each
#               comm), 20 ncclCommSuspend/Resume cycles (3 processes, ncclCommMemStats);
#               each prints PASS (ranks of one process on one GPU are refused by the CUDA
#               backend: the 'threads' mode runs in CI only); then the reduction adapter's GPU
#               program (nccl/: fp8, unsigned, PreMulSum with a device scalar in a replayed graph)
#   ncclabi     torch's own "nccl" backend on actorcc's libnccl.so.2 (nccl/, preloaded), ranks sharing
#               GPU 0 (tests/python/nccl_abi_workers.py): the collective matrix (every op incl. AVG
#               and PREMUL_SUM, every dtype) at world 2, DDP + FSDP2 at 2, new_group
#               split (device_id) at 4 and fresh at 3, batch and lone p2p, destroy + init again, a
#               SIGKILLed rank (Work.wait and watchdog) and a stalled one, fresh groups once more with
#               LD_AUDIT instead of LD_PRELOAD, each process checking that the one libnccl it maps is
#               actorcc's; builds only the library (target actorcc_nccl,
#               then actorcc_nccl_audit) on the gpu preset. ~4 min
#   nccltests   NVIDIA's nccl-tests (source in .thirdparty/nccl-tests, MPI from the mpich wheel in
#               .whl/) built against the library in MPI mode: every *_perf binary, -c 1 -d all -o all,
#               worlds 2, 3, 4 (one process per rank, NCCL_TESTS_DEVICE=0), #wrong must be 0 in
#               every run; one binary at world 1 on NVIDIA's NCCL as the control; nccltests.txt. ~4 min
#               (NCCLTESTS_WORLDS, NCCLTESTS_BINS: a subset, e.g. "4" and "sendrecv_perf")
#   ncclclients a ctypes client with vLLM's PyNccl bindings (library by VLLM_NCCL_SO_PATH, CUDA graph)
#               and CuPy's NcclCommunicator (preloaded), nccl4py (wheels in .whl/) and JAX where
#               present, world 2 sharing GPU 0, exact results. ~90 s
#   reportshape bench/nccl_report_shape.py: Ray-style one-GPU processes started 0.5-1 s apart,
#               init_process_group("nccl"), all_reduce 4 KB - 1 GiB checked, start-up and first-call
#               times; variants (REPORTSHAPE_VARIANTS, default all): actorcc's library preloaded
#               (actorcc-2, actorcc-4; actorcc-devid-4 with device_id), NVIDIA's (nvidia-2, NCCL_HOSTID
#               per rank where the ranks share a GPU), actorcc.Communicator (api-2, api-4: the
#               baseline; builds the extension), torch's "actorcc" backend (actorcc-backend-4: the
#               same Communicator under torch's own steps); REPORTSHAPE_REPEAT=K runs them all K
#               times; REPORTSHAPE_LOG: the ranks' ACTORCC_LOG (default info). Each actorcc run is
#               split by bench/first_call_split.py (the caller's steps and actorcc's; at info or
#               debug): a SPLIT line and $OUT/<run>.split.json. ~2 min
#   nccl        ncclconf ncclabi nccltests ncclclients reportshape
#   elastic     (<= 220 s) elastic membership on the CUDA backend, 3 and 4 ranks sharing
#               GPU 0: a rank SIGKILLed while the others' all_reduce kernel waits for it, shrink,
#               exact results, grow back with a restarted process (tests/python/test_gpu_elastic.py),
#               then 20 such cycles at 4 ranks with the survivors' processes living through all;
#               ELASTIC-GPU lines: kill -> first correct call, restarted process's rejoin (bar 1 s
#               each; the cycles' median and max); reuses the build phase's folder and builds only
#               the extension
#   closegraph  (<= 400 s) close() and process exit with live CUDA graphs that captured actorcc
#               collectives, GPU groups across 2 virtual nodes (2 x 1 and 2 x 2 ranks sharing GPU 0,
#               tests/python/closegraph_device.py): every rank must exit 0 in time, close() < 20 s
#   suspend     (<= 200 s) Communicator.suspend/resume on the CUDA backend, 4 ranks sharing GPU 0
#               beside a process that initialised CUDA the same way without a communicator
#               (tests/python/suspend_device.py): each process's GPU memory (nvidia-smi by pid)
#               after init, suspend and resume, resume + first all_reduce timed, 20 cycles exact;
#               SUSPEND-GPU PASS when suspended is within 2 MiB of the baseline, resume + first
#               all_reduce < 20 ms and nothing grows; suspend.json. Reuses the build phase's
#               folder and builds only the extension
#   all         build tier evidence shared vnodes mutations bench p2p
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
# group name cap devices env worker-args...: one gpu_worker per entry of devices (a comma list);
# each rank's case counts go to $OUT/counts/NAME/, rank 0's total line to counts.txt.
group() {
  local name=$1 cap=$2 devs=$3 envs=$4
  shift 4
  mkdir -p "$OUT/counts/$name"
  # shellcheck disable=SC2086  # envs: words on purpose
  # NODES=K: the ranks in K virtual nodes (gpu_launch --nodes)
  step "$name" "$cap" env $envs "$G/gpu_launch" --devices "$devs" --ids 32 --timeout $((cap - 5)) --nodes "${NODES:-1}" -- \
    "$G/gpu_worker" --counts "$OUT/counts/$name" "$@" || FAILED=1
  tier_lines "$name"
  printf '%-30s %s\n' "$name" "$(grep -h '^COUNT-TOTAL' "$OUT/logs/$name.log" | head -1)" >>"$OUT/counts.txt"
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
  case $w in 2) cap=130 sample=1 ;; 3) cap=130 sample=1 ;; 4) cap=150 sample=2 ;; *) cap=200 sample=6 ;; esac
  [ "$NGPU" -ge 2 ] && sample=1
  group "shared-$w" "$cap" "$(devlist "$w")" "ACTORCC_TEST_SAMPLE=$sample" --shared-gpu
}

# evidence W: W ranks round-robin over the GPUs (all on one where one is lent; --shared-gpu
# where they share), the evidence matrix for S seconds; the step's cap leaves the group's start
# and end on top.
phase_evidence() {
  ensure_build gpu || return
  local w=$1 s share=--shared-gpu
  case $w in 2) s=14 ;; 3) s=16 ;; 4) s=18 ;; *) s=20 ;; esac
  [ "$w" -le "$NGPU" ] && share=
  # shellcheck disable=SC2086  # share: no word when the ranks have a GPU each
  group "evidence-$w" $((s + 14)) "$(devlist "$w")" "" $share --evidence "$s"
  grep -h "^COUNT-BY\|^COUNT-TOTAL" "$OUT/logs/evidence-$w.log" | head -40
}

# vnodes: virtual nodes (ACTORCC_NODE_ID + NCCL_HOSTID per node, from gpu_launch and
# actorcc-bench --nodes) on whatever GPUs are lent, ranks sharing them (ACTORCC_CUDA_SHARE_GPU=1):
# the hierarchical GPU backend (the CUDA backend inside a node, NCCL rails between over NCCL's
# socket transport) on 2 nodes x 1 rank and 2 x 2:
#  - gpu_worker's evidence matrix (every collective x dtype x op, misaligned and in place, three
#    sizes; integer avg refused on every rank), then a CUDA graph of all_reduce chains,
#    all_gather and barrier replayed, and calls back to back, each checked exactly;
#  - checked bench sweeps: odd counts, one case >= 64 MiB (chunked, pipelined), a graph case,
#    broadcast from a root on either node, and unequal nodes (2 + 1 ranks: the node leaders);
#  - a rank killed mid-run and one that hangs, which the other ranks must name within the
#    timeout, after the sweep has started;
#  - actorcc against flat NCCL over the same ranks in one run (2 x 1: NCCL can form that one).
# vnodes_fault NAME RANK ARGS...: a bench run where RANK fails by ARGS; it must end non-zero with an
# error naming RANK, within the step's cap (the other ranks do not hang).
vnodes_fault() {
  local fname=$1 frank=$2 frc log
  shift 2
  log=$OUT/logs/vnodes-2x2-$fname.log
  step "vnodes-2x2-$fname" 30 env ACTORCC_CUDA_SHARE_GPU=1 "$BENCH" --gpus 4 --nodes 2 --stagger 0 --impl actorcc \
    -n 2 -w 1 -c 1 --no-plot -b 1M -e 16M -f 4 "$@"
  frc=$?
  if [ "$frc" = 0 ] || ! grep -q "rank $frank" "$log"; then
    echo "vnodes-2x2-$fname: expected a failure naming rank $frank (exit $frc)"
    VN_BAD=1
  fi
  # the failure must come from the injection (the sweep reached it), not from before it
  grep -q "injected" "$log" || { echo "vnodes-2x2-$fname: the injection was not reached"; VN_BAD=1; }
  grep -h "^actorcc-bench" "$log" | head -6
}

phase_vnodes() {
  ensure_build gpu || return
  local name gpus args t0 runs=0
  VN_BAD=0
  t0=$(date +%s)
  # The evidence matrix across nodes: S seconds of cases, then its graph and back-to-back part.
  NODES=2 group vnodes-evidence-2x1 40 "$(devlist 2)" "ACTORCC_CUDA_SHARE_GPU=1" --shared-gpu --evidence 12
  NODES=2 group vnodes-evidence-2x2 55 "$(devlist 4)" "ACTORCC_CUDA_SHARE_GPU=1" --shared-gpu --evidence 20
  for name in vnodes-evidence-2x1 vnodes-evidence-2x2; do
    grep -h "^evidence" "$OUT/logs/$name.log" | head -6
    grep -q "^evidence across nodes: graph and back-to-back done" "$OUT/logs/$name.log" ||
      { echo "$name: the graph part did not run"; VN_BAD=1; }
  done
  while read -r name gpus args; do
    # shellcheck disable=SC2086  # args: words on purpose
    step "vnodes-$name" 30 env ACTORCC_CUDA_SHARE_GPU=1 "$BENCH" --gpus "$gpus" --nodes 2 --stagger 0 --impl actorcc \
      -n 2 -w 1 -c 1 --no-plot --timeout 20 $args -J "$OUT/vnodes-$name.json" || VN_BAD=1
    runs=$((runs + 1))
    # the route each size took is in the JSON ("algo"), not in the printed table
    grep -Eq '"algo": "(hier|rail|leaders)_[a-z_]+"' "$OUT/vnodes-$name.json" ||
      { echo "vnodes-$name: no hierarchical route in its JSON"; VN_BAD=1; }
    # unequal nodes (2 + 1 ranks): the node-leaders fallback, logged with its reason
    case $name in 2+1-*)
      grep -q '"algo": "leaders_' "$OUT/vnodes-$name.json" && grep -q "unequal numbers of ranks" "$OUT/logs/vnodes-$name.log" ||
        { echo "vnodes-$name: no logged node-leaders route"; VN_BAD=1; } ;;
    esac
  done <<'EOF'
2x2-ar-float-sum-64M 4 --coll all_reduce -d float -o sum -b 4004 -e 68M -f 130
2x2-ar-bf16-avg-graph 4 --coll all_reduce -d bfloat16 -o avg -b 1002 -e 4M -f 64 -G 2
2x2-rs-int32-prod 4 --coll reduce_scatter -d int32 -o prod -b 16016 -e 8M -f 22
2x2-bc-float-root3 4 --coll broadcast -d float -r 3 -b 4004 -e 16M -f 64
2x1-ar-half-min-inplace 2 --coll all_reduce -d half -o min --inplace -b 2002 -e 16M -f 90
2+1-ar-float-sum 3 --coll all_reduce -d float -o sum -b 4004 -e 4M -f 32
2+1-ag-int32 3 --coll all_gather -d int32 -b 6006 -e 4M -f 32
EOF
  # A rank killed mid-run (rank 2: node 1); a rank that hangs outside any call (rank 1): its
  # node peer's kernels and its rail peer's NCCL call (watched against --timeout) must end.
  vnodes_fault kill 2 --timeout 10 --inject-fail 2@4M
  vnodes_fault hang 1 --timeout 5 --inject-hang 1@4M
  # actorcc (hierarchical) against flat NCCL over the same 2 ranks in one run; the table shows
  # the rails' set-up (NCCL init, the connecting calls) next to the first call's latency.
  step vnodes-bench-2x1 45 env ACTORCC_CUDA_SHARE_GPU=1 ACTORCC_LOG=info "$BENCH" --gpus 2 --nodes 2 --stagger 0 \
    --impl actorcc,nccl -b 1K -e 64M -f 4 -w 2 -n 5 -c 1 --timeout 30 -J "$OUT/vnodes-bench-2x1.json" || VN_BAD=1
  grep -h "rail setup" "$OUT/logs/vnodes-bench-2x1.log" | head -2
  tail -30 "$OUT/logs/vnodes-bench-2x1.log"
  local verdict=PASS
  [ "$VN_BAD" = 0 ] || { verdict=FAIL; FAILED=1; }
  echo "VNODES $verdict: evidence on 2x1 and 2x2, $runs checked bench runs, kill and hang, bench against NCCL in $(($(date +%s) - t0)) s" |
    tee -a "$SUMMARY"
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

# ensure_python_ext: the Python extension (actorcc_py_pkg, importable with PYTHONPATH=$PKG) on
# top of the build phase's folder, built once per machine.
PKG=$ROOT/build/gpu/python/pkg
ensure_python_ext() {  # the library and the extension only (not the GPU tier's programs)
  compgen -G "$PKG/actorcc/_actorcc*.so" >/dev/null && return 0
  step build-python-ext 240 bash -c "{ [ -f build/gpu/CMakeCache.txt ] || cmake --preset gpu >/dev/null; } &&
      cmake -S . -B build/gpu -DACTORCC_PYTHON=ON >/dev/null &&
      cmake --build build/gpu -j$(nproc) --target actorcc_py_pkg" ||
    { tail -40 "$OUT/logs/build-python-ext.log"; FAILED=1; return 1; }
}

phase_p2pnv() {
  ensure_python_ext || return
  step py-gpu-p2p-nvlink 60 env PYTHONPATH="$PKG" python3 -m pytest -q -p no:cacheprovider \
    "tests/python/test_gpu_p2p.py::test_nvlink_path_sharing_one_gpu[2]" \
    "tests/python/test_gpu_p2p.py::test_nvlink_transfer_mismatch_fails_on_both_ends[count]" || FAILED=1
  tail -5 "$OUT/logs/py-gpu-p2p-nvlink.log"
}

phase_torch() {
  ensure_python_ext || return
  step torch-backend 90 env PYTHONPATH="$PKG" python3 tests/python/torch_device.py --ranks 2 --timeout 85 \
    --json "$OUT/torch.json" || FAILED=1
  grep -h -A8 "^ *actorcc *nccl" "$OUT/logs/torch-backend.log"
  grep -h "^TORCH-DEVICE" "$OUT/logs/torch-backend.log" | tee -a "$SUMMARY"
  step torch-graphs 60 env PYTHONPATH="$PKG" python3 -m pytest -q -p no:cacheprovider \
    tests/python/test_torch_graphs.py || FAILED=1
  echo "torch-graphs: $(tail -1 "$OUT/logs/torch-graphs.log")" | tee -a "$SUMMARY"
}

# The per-call cost of the torch backend against NCCL's (the bar: "actorcc" sync and
# async_op at most "nccl" at 4 KiB, 64 KiB and 1 MiB, world 1).
phase_torchbench() {
  ensure_python_ext || return
  ensure_nccl_abi || true  # the "nccl on actorcc's library" variant (ACTORCC_NCCL_ABI_LIB); skipped without it
  mkdir -p "$OUT/torchbench"
  local variants=${TORCHBENCH_VARIANTS:-actorcc,nccl,nccl-actorcc} nv how cap
  nv=$(echo "$variants" | tr ',' '\n' | grep -c .)
  if [ -n "${TORCHBENCH_TRIALS:-}" ]; then  # fresh processes per trial: the spread between processes
    how=(--trials "$TORCHBENCH_TRIALS" -r 5)
    cap=$((14 * nv * TORCHBENCH_TRIALS + 20))
  else  # interleaved rounds: the precise comparison
    how=(--interleave -r "${TORCHBENCH_ROUNDS:-40}")
    cap=$((nv * ${TORCHBENCH_ROUNDS:-40} * 3 / 2 + 60))
  fi
  step "torchbench-w1${TORCHBENCH_TAG:+-$TORCHBENCH_TAG}" "$cap" env PYTHONPATH="$PKG" python3 bench/torch_bench.py \
    --device cuda --worlds 1 --variants "$variants" --cpus "${TORCHBENCH_CPUS:-auto}" -n 2000 "${how[@]}" \
    --variant-timeout 40 -o "$OUT/torchbench" --name "world1${TORCHBENCH_TAG:+-$TORCHBENCH_TAG}" || FAILED=1
  if [ "${TORCHBENCH_SHARED:-1}" = 1 ]; then  # TORCHBENCH_SHARED=0: world 1 only
    # time-sliced (a call waits for the GPU to switch processes, ~2 ms): few calls, to show it runs
    step torchbench-w2-shared 60 env PYTHONPATH="$PKG" python3 bench/torch_bench.py --device cuda --worlds 2 \
      --variants actorcc -n 30 -r 3 --graph-calls 10 --variant-timeout 50 -o "$OUT/torchbench" --name world2-shared ||
      FAILED=1
  fi
  cat "$OUT"/logs/torchbench-w*.log | grep -v "^# wrote" | tee -a "$SUMMARY"
}

phase_elastic() {
  ensure_python_ext || return
  step elastic 220 env PYTHONPATH="$PKG" python3 -m pytest -q -s -p no:cacheprovider tests/python/test_gpu_elastic.py ||
    FAILED=1
  grep -h "^ELASTIC-GPU" "$OUT/logs/elastic.log" | tee -a "$SUMMARY"
  tail -3 "$OUT/logs/elastic.log"
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

AE=$G/gpu_async_errors
# async_case NAME CAP RANKS CHECK_RC ARGS...: one gpu_async_errors run of RANKS ranks (IDS group
# ids, default 1); it passes
# when every rank prints its PASS line and, with CHECK_RC=1, every process exits 0 (what
# compute-sanitizer's --error-exitcode turns a report into). The kill case's culprit dies by
# design, so there the exit code says nothing.
async_case() {
  local name=$1 cap=$2 n=$3 check_rc=$4 rc pass fail
  shift 4
  step "$name" "$cap" env ACTORCC_CUDA_SHARE_GPU=1 "$G/gpu_launch" --devices "$(devlist "$n")" --ids "${IDS:-1}" \
    --timeout $((cap - 5)) -- "$@"
  rc=$?
  pass=$(grep -c "^RESULT async .*: PASS" "$OUT/logs/$name.log")
  fail=$(grep -c "^RESULT async .*: FAIL" "$OUT/logs/$name.log")
  grep -h "^RESULT async\|ERROR SUMMARY\|RACECHECK SUMMARY\|gpu_launch:" "$OUT/logs/$name.log"
  if [ "$pass" -ne "$n" ] || [ "$fail" -ne 0 ] || { [ "$check_rc" = 1 ] && [ "$rc" -ne 0 ]; }; then
    echo "$name: FAIL ($pass of $n ranks passed, $fail failed, exit $rc)" | tee -a "$SUMMARY"
    FAILED=1
    return 1
  fi
}

# The stall case runs 5 times: its error names the culprit only if the kernels' first error
# record is the one kept (every CTA of the waiting kernel gives up at about the same moment).
phase_errors() {
  ensure_build gpu || return
  local c ok=0 n=0
  for c in stall-1 stall-2 stall-3 stall-4 stall-5 leave abort kill; do
    n=$((n + 1))
    async_case "errors-$c" 25 2 "$([ $c = kill ] && echo 0 || echo 1)" "$AE" "${c%-*}" && ok=$((ok + 1))
  done
  echo "errors: $ok of $n GPU failure cases passed" | tee -a "$SUMMARY"
}

phase_mismatch() {
  ensure_build gpu || return
  local verdict=PASS
  IDS=13 async_case mismatch 45 2 1 "$AE" mismatch || verdict=FAIL
  # Not anchored: the two ranks' lines share the log with the root's warnings, and a line can
  # start in the middle of another.
  grep -ho "MISMATCH [a-z_0-9]* rank [0-9]*: .*" "$OUT/logs/mismatch.log" | cut -c1-240
  echo "mismatch: $verdict ($(grep -o 'MISMATCH [a-z_0-9]* rank [0-9]*: PASS' "$OUT/logs/mismatch.log" | wc -l) of 24 rank x kind checks passed)" |
    tee -a "$SUMMARY"
}

# One run per mode with the check and one without; each row's time (mean) and p50 in us.
phase_mismatchcost() {
  ensure_build gpu || return
  local mode chk g gpus=2 share=1 name
  [ "$NGPU" -ge 2 ] && share=0
  rm -f "$OUT/mismatchcost.txt"
  for g in 0 5; do
    mode=$([ $g = 0 ] && echo eager || echo graph)
    for chk in 1 0; do
      name=cost-$mode-check$chk
      step "$name" 20 env ACTORCC_CUDA_SHARE_GPU=$share ACTORCC_CUDA_CALL_CHECK=$chk "$BENCH" --gpus $gpus \
        --impl actorcc --stagger 0 -b 4K -e 1M -f 256 -n "$([ $share = 1 ] && echo 100 || echo 300)" -w 20 -c 1 -G $g \
        --no-plot --timeout 10 || FAILED=1
      awk -v m=$mode -v k=$chk '$1 ~ /^[0-9]+$/ && NF >= 10 {print "COST", m, "check=" k, $1, $5, $9, $8}' \
        "$OUT/logs/$name.log" >>"$OUT/mismatchcost.txt"
    done
  done
  # per (mode, size): with the check against without (mean time and p50, us), against the
  # check's bar (at most 3% or 0.2 us more, p50), and the wrong results of all runs
  awk '{key=$2" "$4; n[key" "$3]++; t[key" "$3]+=$5; p[key" "$3]+=$6; w+=$7}
       END {for (k in n) if (k ~ /check=1$/) {b=k; sub(/check=1$/, "check=0", b); if (!(b in n)) continue; split(k, f, " ");
         d=p[k]/n[k]-p[b]/n[b]; ok=(d <= 0.2 || d <= 0.03*p[b]/n[b]) ? "within" : "OVER";
         printf "MISMATCHCOST %s %8s B: time %.2f vs %.2f us (%+.2f), p50 %.2f vs %.2f us (%+.2f, %+.1f%%): %s the bar\n",
           f[1], f[2], t[k]/n[k], t[b]/n[b], t[k]/n[k]-t[b]/n[b], p[k]/n[k], p[b]/n[b], d, 100*d/(p[b]/n[b]), ok}
         printf "mismatchcost: %d wrong results\n", w}' "$OUT/mismatchcost.txt" | sort | tee -a "$SUMMARY"
}

# 1 rank runs only the copy kernels; 2 ranks sharing the GPU run the NVLink routes.
phase_sanitize() {
  ensure_build gpu || return
  local cs ok=0
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [ -x "$cs" ] || { echo "sanitize: FAIL (no compute-sanitizer)" | tee -a "$SUMMARY"; FAILED=1; return; }
  async_case sanitize-memcheck-1 15 1 1 "$cs" --tool memcheck --error-exitcode 3 "$AE" matrix && ok=$((ok + 1))
  async_case sanitize-memcheck-2 20 2 1 "$cs" --tool memcheck --error-exitcode 3 "$AE" matrix && ok=$((ok + 1))
  async_case sanitize-racecheck-2 20 2 1 "$cs" --tool racecheck --error-exitcode 3 "$AE" matrix && ok=$((ok + 1))
  echo "sanitize: $ok of 3 compute-sanitizer runs clean" | tee -a "$SUMMARY"
}

# ncclconf: tests/nccl/nccl_abi_test in GPU mode (NCCL_ABI_TEST_GPU=1), each case in its own step.
phase_ncclconf() {
  ensure_nccl_abi || return
  step build-ncclconf 240 cmake --build build/gpu -j"$(nproc)" --target nccl_abi_test actorcc_nccl_adapt_gpu ||
    { FAILED=1; return; }
  # the reduction adapter (fp8, unsigned, PreMulSum incl. a device scalar in a replayed graph)
  step ncclconf-adapt 120 env ACTORCC_CUDA_SHARE_GPU=1 CUDA_VISIBLE_DEVICES=0 build/gpu/nccl/actorcc_nccl_adapt_gpu || FAILED=1
  grep -h "PASS\|FAIL\|failures" "$OUT/logs/ncclconf-adapt.log" | head -8
  local t name
  # ranks of one process sharing a GPU are refused by the CUDA backend: "threads" runs in CI only
  for t in "procs 2" "procs 4" abort kill mismatch stall elastic suspend; do
    name=ncclconf-${t// /}
    step "$name" 60 env NCCL_ABI_TEST_GPU=1 ACTORCC_CUDA_SHARE_GPU=1 ACTORCC_TIMEOUT_S=10 \
      ACTORCC_SOCKET_ADDR=127.0.0.1 CUDA_VISIBLE_DEVICES=0 build/gpu/tests/nccl/nccl_abi_test $t || FAILED=1
    grep -h "^PASS\|FAIL" "$OUT/logs/$name.log" | head -6
  done
}

# ---- actorcc's libnccl.so.2 (the nccl/ front end) under NCCL's own users ----------------------
NCCL_ABI_LIB=$ROOT/build/gpu/nccl/libnccl.so.2
# ensure_nccl_abi: configures the gpu preset (once) and builds only the library (and its LD_AUDIT
# module), not the GPU tier.
ensure_nccl_abi() {
  export ACTORCC_NCCL_ABI_LIB=$NCCL_ABI_LIB
  [ -f "$NCCL_ABI_LIB" ] && return 0
  # the LD_AUDIT module is not used by these phases: its build may fail without stopping them
  step build-nccl-abi 300 bash -c "{ [ -f build/gpu/CMakeCache.txt ] || cmake --preset gpu; } &&
      cmake --build build/gpu -j$(nproc) --target actorcc_nccl &&
      { cmake --build build/gpu --target actorcc_nccl_audit || echo 'no LD_AUDIT module built'; }" ||
    { tail -40 "$OUT/logs/build-nccl-abi.log"; FAILED=1; return 1; }
}

# nccl_verdict NAME OK N WHAT: the phase's one summary line
nccl_verdict() {
  local v=PASS
  [ "$2" = "$3" ] || { v=FAIL; FAILED=1; }
  echo "$1 $v: $2 of $3 $4" | tee -a "$SUMMARY"
}

phase_ncclabi() {
  ensure_nccl_abi || return
  local c w cap mode ok=0 n=0
  while read -r c w cap mode; do
    n=$((n + 1))
    step "ncclabi-$c-$w-$mode" "$cap" python3 tests/python/nccl_abi_workers.py --case "$c" --world "$w" --mode "$mode" \
      --timeout $((cap - 10)) --logdir "$OUT/logs/ncclabi" && ok=$((ok + 1))
    grep -h "^NCCLABI\|^IDENTITY rank 0\|^RAISED" "$OUT/logs/ncclabi-$c-$w-$mode.log" | cut -c1-300
  done <<'CASES'
matrix 2 90 preload
train 2 60 preload
groups 4 70 preload
fresh 3 60 preload
fresh 2 50 audit
kill 3 45 preload
killwd 2 45 preload
stall 2 45 preload
CASES
  grep -h "^FAIL\|^REFUSED" "$OUT"/logs/ncclabi/*.log 2>/dev/null | cut -d' ' -f4- | sort | uniq -c | sort -rn | head -20
  nccl_verdict NCCLABI $ok $n "torch nccl-backend cases passed (matrix, DDP/FSDP2, groups, p2p, re-init, kill, stall)"
}

phase_nccltests() {
  ensure_nccl_abi || return
  local src=.thirdparty/nccl-tests mpi=$ROOT/build/mpich home=$ROOT/build/nccl-home nt=$ROOT/build/nccl-tests
  local nv b w rc wrong bins ok=0 n=0 table=$OUT/nccltests.txt
  [ -f "$src/Makefile" ] || { echo "NCCLTESTS FAIL: no nccl-tests source in $src" | tee -a "$SUMMARY"; FAILED=1; return; }
  if [ ! -x "$mpi/bin/mpiexec" ]; then
    step nccltests-mpi 90 python3 -m pip install -q --no-index --no-deps --prefix "$mpi" .whl/mpich-*.whl ||
      { tail -5 "$OUT/logs/nccltests-mpi.log"; FAILED=1; return; }
  fi
  # NCCL_HOME: NVIDIA's nccl.h from the nvidia.nccl wheel, actorcc's library as lib/libnccl.so(.2)
  nv=$(python3 -c 'import nvidia.nccl, os; print(nvidia.nccl.__path__[0])') ||
    { echo "NCCLTESTS FAIL: no nvidia.nccl wheel (its nccl.h)" | tee -a "$SUMMARY"; FAILED=1; return; }
  mkdir -p "$home/include" "$home/lib"
  cp -r "$nv"/include/. "$home/include/"
  ln -sf "$NCCL_ABI_LIB" "$home/lib/libnccl.so"
  ln -sf "$NCCL_ABI_LIB" "$home/lib/libnccl.so.2"
  if ! compgen -G "$nt/*_perf*" >/dev/null; then
    step nccltests-build 240 make -C "$src" -j"$(nproc)" MPI=1 MPI_HOME="$mpi" NCCL_HOME="$home" \
      CUDA_HOME=/usr/local/cuda BUILDDIR="$nt" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" ||
      { tail -30 "$OUT/logs/nccltests-build.log"; FAILED=1; return; }
  fi
  bins=$(find "$nt" -maxdepth 1 -type f -perm -u+x -name '*_perf*' | sort)
  # NCCLTESTS_BINS: only these binaries (names, e.g. "sendrecv_perf"), to re-run a part
  [ -n "${NCCLTESTS_BINS:-}" ] && bins=$(for b in $NCCLTESTS_BINS; do echo "$nt/$b"; done)
  LD_LIBRARY_PATH=$home/lib:$mpi/lib ldd "$(echo "$bins" | head -1)" | grep nccl
  printf '%-22s %5s %4s %6s\n' binary world exit wrong >"$table"
  for w in ${NCCLTESTS_WORLDS:-2 3 4}; do
    for b in $bins; do
      n=$((n + 1))
      step "nccltests-${b##*/}-$w" 60 env LD_LIBRARY_PATH="$home/lib:$mpi/lib:${LD_LIBRARY_PATH:-}" NCCL_TESTS_DEVICE=0 \
        CUDA_VISIBLE_DEVICES=0 ACTORCC_CUDA_SHARE_GPU=1 "$mpi/bin/mpiexec" -launcher fork -n "$w" "$b" \
        -b 8 -e 1M -f 32 -n 2 -w 1 -c 1 -d all -o all
      rc=$?
      if grep -q "not a power of 2, skipping" "$OUT/logs/nccltests-${b##*/}-$w.log"; then  # hypercube at 3
        printf '%-22s %5s %4s %6s\n' "${b##*/}" "$w" "$rc" skipped >>"$table"
        n=$((n - 1))
        continue
      fi
      wrong=$(grep -hio "out of bounds values : [0-9]*" "$OUT/logs/nccltests-${b##*/}-$w.log" | awk '{s+=$NF} END {print s+0}')
      grep -qi "out of bounds values" "$OUT/logs/nccltests-${b##*/}-$w.log" || wrong=missing
      printf '%-22s %5s %4s %6s\n' "${b##*/}" "$w" "$rc" "$wrong" >>"$table"
      [ "$rc" = 0 ] && [ "$wrong" = 0 ] && ok=$((ok + 1))
    done
  done
  # the control: the same build at world 1 on NVIDIA's NCCL (the wheel's library first on the path)
  step nccltests-control-nvidia 60 env LD_LIBRARY_PATH="$nv/lib:$mpi/lib:${LD_LIBRARY_PATH:-}" CUDA_VISIBLE_DEVICES=0 \
    "$mpi/bin/mpiexec" -launcher fork -n 1 "$nt/all_reduce_perf" -b 8 -e 1M -f 32 -n 2 -w 1 -c 1 -d all -o all
  rc=$?
  printf '%-22s %5s %4s %6s  (NVIDIA NCCL, control)\n' all_reduce_perf 1 "$rc" \
    "$(grep -hio 'out of bounds values : [0-9]*' "$OUT/logs/nccltests-control-nvidia.log" | awk '{print $NF}')" >>"$table"
  cat "$table"
  nccl_verdict NCCLTESTS $ok $n "nccl-tests runs (every binary x worlds 2-4, -d all -o all -c 1) exited 0 with 0 wrong"
}

phase_ncclclients() {
  ensure_nccl_abi || return
  local c ok=0
  local cases="ctypes cupy"
  # nccl4py travels as wheels (.whl/: nccl4py, cuda_core, cuda_bindings, cuda_pathfinder); JAX is
  # in the image
  if ls .whl/nccl4py-*.whl >/dev/null 2>&1 &&
    python3 -m pip install -q --no-index --no-deps .whl/nccl4py-*.whl .whl/cuda_core-*.whl \
      .whl/cuda_bindings-*.whl .whl/cuda_pathfinder-*.whl >"$OUT/logs/nccl4py-install.log" 2>&1; then
    cases+=" nccl4py"
  fi
  python3 -c "import jax" 2>/dev/null && cases+=" jax"
  local n=0
  for c in $cases; do
    n=$((n + 1))
    step "ncclclients-$c" 90 python3 tests/python/nccl_abi_workers.py --case "$c" --world 2 --timeout 80 \
      --logdir "$OUT/logs/ncclclients" && ok=$((ok + 1))
    grep -h "^NCCLABI" "$OUT/logs/ncclclients-$c.log"
  done
  nccl_verdict NCCLCLIENTS $ok $n "clients ($cases) exact at world 2"
}

phase_reportshape() {
  ensure_nccl_abi || return
  local ok=0 n=0 k v w name log=${REPORTSHAPE_LOG:-info}
  local repeats=${REPORTSHAPE_REPEAT:-1} variants=${REPORTSHAPE_VARIANTS:-actorcc-2 actorcc-4 actorcc-devid-4 nvidia-2 api-2 api-4}
  # api: the baseline of the library's start-up and first call, actorcc's own API in the same
  # script; it and actorcc-backend need the extension
  if [[ $variants == *api-* || $variants == *actorcc-backend-* ]] && ! ensure_python_ext; then
    variants=${variants//api-[0-9]/}
    variants=${variants//actorcc-backend-[0-9]/}
  fi
  for ((k = 1; k <= repeats; k++)); do
    for v in $variants; do
      w=${v##*-} name=reportshape-$v${REPORTSHAPE_REPEAT:+-r$k} n=$((n + 1))
      # ACTORCC_LOG=info (REPORTSHAPE_LOG: another level): each rank's "ready" line splits
      # actorcc's part of the first call (local, join, setup) from torch's
      case ${v%-*} in
        actorcc) step "$name" 150 env LD_PRELOAD="$NCCL_ABI_LIB" ACTORCC_LOG="$log" python3 bench/nccl_report_shape.py \
          --world "$w" --timeout 140 --json "$OUT/$name.json" ;;
        actorcc-devid) step "$name" 150 env LD_PRELOAD="$NCCL_ABI_LIB" ACTORCC_LOG="$log" python3 \
          bench/nccl_report_shape.py --device-id --world "$w" --timeout 140 --json "$OUT/$name.json" ;;
        # NVIDIA's NCCL refuses ranks sharing a GPU unless they seem on other hosts
        nvidia) step "$name" 150 python3 bench/nccl_report_shape.py --world "$w" --hostid-per-rank --timeout 140 \
          --json "$OUT/$name.json" ;;
        api) step "$name" 100 env PYTHONPATH="$PKG" ACTORCC_LOG="$log" python3 bench/nccl_report_shape.py \
          --backend actorcc-api --world "$w" --timeout 90 --json "$OUT/$name.json" ;;
        actorcc-backend) step "$name" 100 env PYTHONPATH="$PKG" ACTORCC_LOG="$log" python3 \
          bench/nccl_report_shape.py --backend actorcc --world "$w" --timeout 90 --json "$OUT/$name.json" ;;
        *) echo "reportshape: unknown variant $v" >"$OUT/logs/$name.log"; false ;;
      esac && ok=$((ok + 1))
      grep -h "^rank\|^REPORTSHAPE" "$OUT/logs/$name.log"
      # where the first call went (actorcc's variants at info or debug; NVIDIA's has no such lines)
      if [ "${v%-*}" != nvidia ] && [ "$log" != warn ] && [ -f "$OUT/$name.json" ]; then
        python3 bench/first_call_split.py --json "$OUT/$name.json" --log "$OUT/logs/$name.log" \
          --out "$OUT/$name.split.json" | sed -n "s/^  spans: /SPLIT $name: /p"
      fi
    done
  done
  nccl_verdict REPORTSHAPE $ok $n "report-shape runs passed ($variants; x$repeats)"
}

# close() and exit with live CUDA graphs across virtual nodes: 4 cases of at
# most 90 s each; PASS when every rank of every case exits 0 in time with close() under 20 s.
phase_closegraph() {
  ensure_python_ext || return
  step closegraph 400 env PYTHONPATH="$PKG" python3 tests/python/closegraph_device.py --timeout 90 || FAILED=1
  grep -h "^CLOSEGRAPH" "$OUT/logs/closegraph.log" | tee -a "$SUMMARY"
}

# Suspend and resume that release the GPU memory.
phase_suspend() {
  ensure_python_ext || return
  step suspend 200 env PYTHONPATH="$PKG" python3 tests/python/suspend_device.py --ranks 4 --cycles 20 --timeout 190 \
    --json "$OUT/suspend.json" || FAILED=1
  grep -h -A4 "^SUSPEND-GPU" "$OUT/logs/suspend.log" | tee -a "$SUMMARY"
}

[ $# -gt 0 ] || { sed -n '2,/^# Env:/p' "$0"; exit 2; }
phases=("$@")
[ "$*" = all ] && phases=(build tier evidence shared vnodes mutations bench p2p)
{
  echo "== device.sh ${phases[*]}: $NGPU GPU(s), budget ${BUDGET}s, $(date -u +%FT%TZ)"
  nvidia-smi -L 2>&1
} | tee -a "$SUMMARY"
nvidia-smi topo -m >"$OUT/topo.txt" 2>&1
for p in "${phases[@]}"; do
  case $p in
    build | tier | vnodes | mutations | bench | timeout | tune | p2p | errors | mismatch | mismatchcost | sanitize | p2pnv | torch | \
      torchbench | elastic | closegraph | suspend | ncclconf | ncclabi | nccltests | ncclclients | reportshape)
      "phase_$p" ;;
    nccl) for q in ncclconf ncclabi nccltests ncclclients reportshape; do "phase_$q"; done ;;
    shared) for w in 2 3 4 8; do phase_shared $w; done ;;
    shared2 | shared3 | shared4 | shared8) phase_shared "${p#shared}" ;;
    evidence) for w in 2 3 4 8; do phase_evidence $w; done ;;
    evidence2 | evidence3 | evidence4 | evidence8) phase_evidence "${p#evidence}" ;;
    *) echo "unknown phase '$p'"; exit 2 ;;
  esac
done
echo "== summary ($(($(date +%s) - T0)) s)"
cat "$SUMMARY"
# Everything but the summary in one archive: a run's dozens of logs and JSON files then come
# back as one file wherever only a few files are fetched from $OUT.
# tar exits 1 when a file changed while it was read (a log the caller still writes, such as its
# own redirect into $OUT): the archive is still whole, so only a worse exit keeps the files. A
# top-level *.log is the caller's and stays.
tar -czf "$OUT/results.tgz" -C "$OUT" --exclude results.tgz --exclude summary.txt . 2>/dev/null
[ $? -le 1 ] && find "$OUT" -mindepth 1 -maxdepth 1 ! -name results.tgz ! -name summary.txt ! -name '*.log' -exec rm -rf {} +
exit $FAILED
