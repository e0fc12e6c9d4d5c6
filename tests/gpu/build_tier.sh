# Sourced by run.sh, tune.sh and shared.sh (device machine): the no-multicast settings,
# ROOT/OUT/BUILD, and gpu_worker + gpu_launch built by the full project (or, if that fails, the
# standalone tests/gpu project). Sets BIN to the folder holding them and T0 to the start time;
# exits with the build log's tail when neither builds. ACTORCC_GPU_PREBUILT=1 reuses a build the
# caller made. Defines left and gpu_group (below) for the callers.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-$ROOT/gpu-out}"
mkdir -p "$OUT"
BUILD="${ACTORCC_GPU_BUILD:-$ROOT/build-gpu}"
JOBS="$(nproc 2>/dev/null || echo 8)"
GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
cd "$ROOT"
nvidia-smi -L > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi topo -m >> "$OUT/nvidia-smi.txt" 2>&1

T0=$(date +%s)
BUILD_OK=0
if [ "${ACTORCC_GPU_PREBUILT:-0}" = 1 ] && [ -x "$BUILD/tests/gpu/gpu_worker" ]; then
  BIN="$BUILD/tests/gpu"; BUILD_OK=1  # built by the caller (scripts/device_all.sh) with everything else
elif cmake -S . -B "$BUILD" "${GEN[@]}" -DACTORCC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DACTORCC_TOOLS=OFF \
     -DACTORCC_TESTS=ON > "$OUT/build.log" 2>&1 && cmake --build "$BUILD" -j "$JOBS" --target gpu_worker gpu_launch >> "$OUT/build.log" 2>&1; then
  BIN="$BUILD/tests/gpu"; BUILD_OK=1
else
  echo "full configure/build failed (see build.log); trying the standalone gpu project" | tee -a "$OUT/build.log"
  BUILD="$BUILD-standalone"
  if cmake -S tests/gpu -B "$BUILD" "${GEN[@]}" -DACTORCC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >> "$OUT/build.log" 2>&1 && \
     cmake --build "$BUILD" -j "$JOBS" --target gpu_worker gpu_launch >> "$OUT/build.log" 2>&1; then
    BIN="$BUILD"; BUILD_OK=1
  fi
fi
echo "build: $([ $BUILD_OK = 1 ] && echo ok || echo FAILED) in $(( $(date +%s) - T0 )) s"
if [ $BUILD_OK != 1 ]; then tail -40 "$OUT/build.log"; exit 1; fi

# Seconds left of the caller's BUDGET since T0.
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }

# gpu_group NAME DEVICES CAP "VAR=VALUE ..." WORKER-ARGS...: one rank per entry of DEVICES (a
# comma list, repeats allowed), gpu_worker under `timeout CAP` with those settings; log in
# $OUT/gpu_NAME.log. Prints "NAME: exit RC in N s (cap CAP)" and returns the exit status.
gpu_group() {
  local name=$1 devs=$2 cap=$3 envs=$4 t rc
  shift 4
  t=$(date +%s)
  # shellcheck disable=SC2086  # envs: words on purpose
  timeout -k 5 "$cap" env $envs "$BIN/gpu_launch" --devices "$devs" --ids 32 --timeout $((cap - 5)) -- \
    "$BIN/gpu_worker" "$@" >"$OUT/gpu_$name.log" 2>&1
  rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - t )) s (cap $cap)"
  return $rc
}
