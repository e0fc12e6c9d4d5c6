#!/usr/bin/env bash
# The sanitizer tier of CI: one clang build (CUDA off) with ASan + UBSan and
# libFuzzer instrumentation, then
#   1. the C++ unit tests, the fault-injection suite and the libnccl.so.2 conformance test's
#      CPU-mode cases (tests/nccl) under ASan + UBSan;
#   2. each libFuzzer target of tests/fuzz for FUZZ_SECONDS (default 10) on a copy of its
#      committed corpus (tests/fuzz/corpus/<target>), so new inputs never dirty the tree;
#   3. a second clang build with ThreadSanitizer (TSAN=0 skips it): the unit tests, the
#      fault-injection suite and the bad-argument broadcast tests, every rank a TSan process.
# Any sanitizer report, fuzzer crash, leak or over-allocation fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${FUZZ_BUILD:-build/sanitize}
TSAN_BUILD=${TSAN_BUILD:-build/tsan}
SECONDS_EACH=${FUZZ_SECONDS:-10}
if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq clang libclang-rt-dev >/dev/null
fi
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# Both builds: -O1 (what the sanitizers' authors advise) and line tables only (-g1: reports keep
# file:line), a quarter less compile time than -O2 -g, which CI's 30 minutes need.
OPT="-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
echo "== sanitizer build ($BUILD)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$OPT" -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang -DACTORCC_CUDA=OFF -DACTORCC_TOOLS=OFF -DACTORCC_TESTS=ON -DACTORCC_FUZZ=ON \
  -DCMAKE_CXX_FLAGS="$SAN -fsanitize=fuzzer-no-link" -DCMAKE_EXE_LINKER_FLAGS="$SAN" -DCMAKE_SHARED_LINKER_FLAGS="$SAN" >/dev/null
cmake --build "$BUILD" --target actorcc_unit_tests actorcc_fault_tests fuzz_wire fuzz_unique_id fuzz_peer_info nccl_abi_test

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Runs a command with its log in $work; prints the log's lines matching `pattern` (or the
# log's tail on failure).
run_logged() {
  local name=$1 pattern=$2
  shift 2
  if "$@" >"$work/$name.log" 2>&1; then
    grep -E "$pattern" "$work/$name.log" || true
  else
    local rc=$?
    grep -v '^\[actorcc ' "$work/$name.log" | tail -n 200
    echo "FAILED ($name, exit $rc)"
    return $rc
  fi
}
# The fault-injection suite waits on timeouts most of its time (a quarter of a core busy), so it
# runs as two gtest shards side by side: half the wall time on CI's two cores.
run_sharded() {
  local name=$1 pattern=$2 rc=0 pids=() i
  shift 2
  for i in 0 1; do
    GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i run_logged "$name-shard$i" "$pattern" "$@" &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || rc=$?; done
  return $rc
}
echo "== unit tests under ASan + UBSan"
gtest='^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests'
run_logged unit "$gtest" "$BUILD/tests/actorcc_unit_tests" --gtest_brief=1
echo "== fault-injection suite under ASan + UBSan"
run_sharded faults "$gtest|named rank" "$BUILD/tests/multiprocess/actorcc_fault_tests" --gtest_brief=1
# The C program drives libnccl.so.2 (instrumented; the program itself only links the runtime):
# the cases where the library frees, aborts or refuses communicators, a few seconds in all.
echo "== libnccl.so.2 conformance cases under ASan + UBSan"
for t in "api" "group_release" "threads 3" "refuse" "shrinkref" "elastic"; do
  # $t unquoted: a case and its argument
  run_logged "nccl_${t// /_}" '^PASS' env ACTORCC_BACKEND=cpu ACTORCC_TIMEOUT_S=5 ACTORCC_JOIN_TIMEOUT_S=30 \
    ACTORCC_SOCKET_ADDR=127.0.0.1 "$BUILD/tests/nccl/nccl_abi_test" $t
done
for t in wire unique_id peer_info; do
  echo "== fuzz_$t for ${SECONDS_EACH} s"
  mkdir -p "$work/$t"
  cp tests/fuzz/corpus/$t/* "$work/$t/"
  # -rss_limit_mb / -malloc_limit_mb: a decoder that allocates by a length it has not checked
  # fails here. The last lines give the runs and the time.
  run_logged "fuzz_$t" '^(Done|stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb))' "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$SECONDS_EACH" -rss_limit_mb=1024 \
    -malloc_limit_mb=256 -print_final_stats=1 "$work/$t"
done

[ "${TSAN:-1}" = 0 ] && exit 0
# ThreadSanitizer cannot share a process with ASan, hence its own build (only what it runs).
# halt_on_error: the first race fails the test it happens in (a worker rank exits non-zero, so
# its group's test fails); TSan's exit code is 66.
TSAN_FLAGS="-fsanitize=thread -fno-omit-frame-pointer"
echo "== ThreadSanitizer build ($TSAN_BUILD)"
cmake -S . -B "$TSAN_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$OPT" -DCMAKE_CXX_COMPILER=clang++ \
  -DACTORCC_CUDA=OFF -DACTORCC_TOOLS=OFF -DACTORCC_TESTS=ON -DACTORCC_FUZZ=OFF \
  -DCMAKE_CXX_FLAGS="$TSAN_FLAGS" -DCMAKE_EXE_LINKER_FLAGS="$TSAN_FLAGS" -DCMAKE_SHARED_LINKER_FLAGS="$TSAN_FLAGS" >/dev/null
cmake --build "$TSAN_BUILD" --target actorcc_unit_tests actorcc_fault_tests actorcc_mp_tests
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
echo "== unit tests under TSan"
# Two unit tests fork a process that already runs threads (the roots of earlier tests) and start
# a root thread in the child, on purpose; TSan cannot follow a thread started after such a fork
# (it stops the child), so they run in the other tiers only.
run_logged tsan_unit "$gtest" "$TSAN_BUILD/tests/actorcc_unit_tests" --gtest_brief=1 \
  --gtest_filter='-Bootstrap.ForkedChildExitsDespiteInheritedRoot:BootstrapLimits.AcceptFailureBacksOffInsteadOfSpinning'
echo "== fault-injection suite under TSan"
run_sharded tsan_faults "$gtest|named rank" "$TSAN_BUILD/tests/multiprocess/actorcc_fault_tests" --gtest_brief=1
echo "== bad-argument broadcast under TSan"
run_logged tsan_bad_call "$gtest|after the refusal" "$TSAN_BUILD/tests/multiprocess/actorcc_mp_tests" --gtest_brief=1 \
  --gtest_filter='*BadCall*:Arguments.*'
