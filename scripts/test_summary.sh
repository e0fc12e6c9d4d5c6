# Sourced by scripts/test.sh: the tally behind its last line, `N passed, N failed` (and
# `, N skipped` where tests were skipped), summed from each tier's own counts. tests/python/
# test_test_summary.py feeds these functions the outputs of ctest, pytest and gtest.
passed=0 failed=0 skipped=0 parts=() spans=() _last=$SECONDS
# count NAME PASSED FAILED SKIPPED; each step's seconds go to `spans` too (where a CI run's time
# goes, which must stay under its limit)
count() {
  passed=$((passed + $2)) failed=$((failed + $3)) skipped=$((skipped + $4))
  parts+=("$1 $2/$3/$4")
  span "$1"
}
# span NAME: the seconds since the previous span or count (a step that counts nothing, the build)
span() {
  spans+=("$1 $((SECONDS - _last)) s")
  _last=$SECONDS
}
summary() {
  local IFS=,
  echo "== seconds per step: ${spans[*]:-none} (total $SECONDS s)" | sed 's/,/, /g'
  unset IFS
  echo "== summary (passed/failed/skipped): ${parts[*]:-nothing ran}"
  echo "$passed passed, $failed failed$([ "$skipped" -gt 0 ] && echo ", $skipped skipped")"
}
# The first number before WORD in FILE's last line that has it (0 when none).
_num() { { grep -E "[0-9]+ $2" "$1" | tail -1 | grep -oE "[0-9]+ $2" | head -1 | grep -oE '^[0-9]+'; } || echo 0; }
# count_ctest FILE RC: ctest's "N% tests passed, F tests failed out of T", less its skipped tests.
count_ctest() {
  local line total f s
  # "100% tests passed, 0 tests failed out of N"; CMake 4 leaves out a zero: "100% tests passed out of N"
  if line=$(grep -E '^[0-9]+% tests passed(, [0-9]+ tests? failed)? out of [0-9]+' "$1" | tail -1); then
    total=${line##* out of } f=0
    [[ $line == *failed* ]] && f=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")
    s=$(grep -cE '^\s*[0-9]+ - .*\(Skipped\)$' "$1" || true)
    count ctest $((total - f - s)) "$f" "$s"
  else
    count ctest 0 1 0  # no count at all: ctest itself failed
  fi
}
# count_pytest FILE RC: pytest's closing "... N passed, N failed, N skipped, N errors in Ts".
count_pytest() {
  local p f s
  p=$(_num "$1" passed) f=$(($(_num "$1" failed) + $(_num "$1" 'errors?'))) s=$(_num "$1" skipped)
  [ "$2" = 0 ] || [ "$f" -gt 0 ] || f=1  # failed without a count (a crash, an interrupt)
  count pytest "$p" "$f" "$s"
}
# count_gtest NAME FILE RC: gtest's "[  PASSED  ] N tests" / "[  FAILED  ] N tests" lines, one
# per libFuzzer target that finished ("Done N runs"), and one per case of the libnccl.so.2
# conformance program that passed ("PASS <case>").
count_gtest() {
  local p f d n
  p=$({ grep -oE '^\[  PASSED  \] [0-9]+' "$2" || true; } | awk '{s += $NF} END {print s + 0}')
  f=$({ grep -oE '^\[  FAILED  \] [0-9]+' "$2" || true; } | awk '{s += $NF} END {print s + 0}')
  d=$(grep -cE '^Done [0-9]+ runs' "$2" || true)
  n=$(grep -cE '^PASS [a-z_]+$' "$2" || true)
  [ "$3" = 0 ] || [ "$f" -gt 0 ] || f=1
  count "$1" $((p + d + n)) "$f" 0
}
