#!/bin/bash
# The GPU benchmark matrix of actorcc-bench, for the device machine. Writes one JSON + PNG +
# log per case, and a combined PNG, into $OUT (default ./bench-out):
#   actors-eager    actors launch (one GPU visible per worker, staggered starts), eager calls,
#                   actorcc vs NCCL vs NCCL with symmetric windows
#   actors-graph    the same with CUDA graphs (-G)
#   actors-permute  actors launch with the rank -> GPU mapping reversed
#   torchrun-nccl   torchrun-style launch (all GPUs visible, started together), NCCL alone
#   torchrun        torchrun-style launch, actorcc vs NCCL
# Env: BENCH (binary; default: build it in $BUILD), BUILD (default build-gpu), SIZES (default
# "-b 1K -e 1G -f 4"), ITERS (default "-w 5": -n by size, 200 calls up to 16 MB, 20 above), STAGGER (default 1), GPUS (default all),
# CASE_TIMEOUT (seconds per case, default 300), HANG_TIMEOUT (the bench's --timeout, default 120),
# CASES (which of the five all_reduce cases above, default all), COLLS (other collectives, each
# as actors-eager-<coll> and actors-graph-<coll> against NCCL and NCCL symmetric; default none).
# Exit status: non-zero when any case failed (each case still runs).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench-out}
BUILD=${BUILD:-build-gpu}
SIZES=${SIZES:--b 1K -e 1G -f 4}
ITERS=${ITERS:--w 5}
STAGGER=${STAGGER:-1}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0  # never NVLS on these machines (the bench sets it in workers too)

if [ -z "${BENCH:-}" ]; then
  BENCH=$BUILD/tools/bench/actorcc-bench
  if [ ! -x "$BENCH" ]; then
    echo "== building actorcc-bench in $BUILD"
    cmake -S . -B "$BUILD" -DACTORCC_CUDA=ON -DACTORCC_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
      make -C "$BUILD" -j"$(nproc)" actorcc-bench >>"$OUT/build.log" 2>&1 ||
      { echo "build failed; see $OUT/build.log"; tail -30 "$OUT/build.log"; exit 1; }
  fi
fi

NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
GPUS=${GPUS:-$NGPU}
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr -c 'A-Za-z0-9\n' '_' | sed 's/_*$//')
TAG=$(date -u +%Y-%m-%d)-${NAME:-gpu}-x${GPUS}
echo "== $GPUS GPUs ($NAME), results in $OUT as $TAG-*"
nvidia-smi topo -m >"$OUT/$TAG-topo.txt" 2>&1

rc=0
run() {
  local name=$1
  shift
  local json="$OUT/$TAG-$name.json"
  echo "== $name: $BENCH $SIZES $ITERS --gpus $GPUS --timeout ${HANG_TIMEOUT:-120} $* -J $json"
  # shellcheck disable=SC2086
  timeout "${CASE_TIMEOUT:-300}" "$BENCH" $SIZES $ITERS --gpus "$GPUS" --timeout "${HANG_TIMEOUT:-120}" "$@" -J "$json" 2>&1 | tee "$OUT/$TAG-$name.log"
  local r=${PIPESTATUS[0]}
  if [ "$r" -ne 0 ]; then
    echo "!! $name exited with $r"
    rc=1
  fi
}

CASES=${CASES-actors-eager actors-graph actors-permute torchrun-nccl torchrun}
wanted() { [[ " $CASES " == *" $1 "* ]]; }
wanted actors-eager && run actors-eager --launch actors --stagger "$STAGGER" --impl actorcc,nccl --nccl-symmetric
wanted actors-graph && run actors-graph --launch actors --stagger "$STAGGER" --impl actorcc,nccl --nccl-symmetric -G 5
wanted actors-permute && run actors-permute --launch actors --stagger "$STAGGER" --permute --impl actorcc,nccl
wanted torchrun-nccl && run torchrun-nccl --launch torchrun --impl nccl
wanted torchrun && run torchrun --launch torchrun --impl actorcc,nccl
for coll in ${COLLS:-}; do
  run "actors-eager-$coll" --coll "$coll" --launch actors --stagger "$STAGGER" --impl actorcc,nccl --nccl-symmetric
  run "actors-graph-$coll" --coll "$coll" --launch actors --stagger "$STAGGER" --impl actorcc,nccl --nccl-symmetric -G 5
done

if ! wanted actors-eager || ! wanted actors-graph || ! wanted torchrun-nccl; then
  :  # the combined all_reduce plot needs those three cases
elif python3 -c "import matplotlib" 2>/dev/null; then
  python3 bench/plot.py "$OUT/$TAG"-actors-eager.json "$OUT/$TAG"-actors-graph.json "$OUT/$TAG"-torchrun-nccl.json \
    -o "$OUT/$TAG-all.png" --title "actorcc-bench $TAG: actors eager/graph vs torchrun NCCL" || rc=1
else
  echo "(matplotlib missing: no PNG; run python3 bench/plot.py $OUT/*.json later)"
fi
ls -la "$OUT"
exit $rc
