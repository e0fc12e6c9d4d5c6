# Sourced by device_all.sh and device_world.sh (device machine), after `RUN=<name>`: the
# no-multicast settings, ROOT (the checkout, also the working directory), OUT (what comes back),
# W=/tmp/actorcc-device/$RUN (logs), B (the build folder), and
#   step NAME TIMEOUT COMMAND...  runs COMMAND with its output in $W/NAME.log and appends its exit
#                                 status and time to $W/summary.txt (returns the status);
#   pack                          copies the summary to $OUT/$RUN-summary.txt and $W to $OUT/$RUN.tgz.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/device-out}
W=/tmp/actorcc-device/$RUN
B=$ROOT/build-gpu
mkdir -p "$W" "$OUT"
SUMMARY=$W/summary.txt
: >"$SUMMARY"
step() {
  local name=$1 to=$2 t0 rc
  shift 2
  t0=$(date +%s)
  timeout -k 10 "$to" "$@" >"$W/$name.log" 2>&1
  rc=$?
  printf '%-28s exit %3d  %4ds\n' "$name" "$rc" "$(($(date +%s) - t0))" | tee -a "$SUMMARY"
  return $rc
}
pack() {
  cp "$SUMMARY" "$OUT/$RUN-summary.txt"
  tar czf "$OUT/$RUN.tgz" -C "$W" .
}
