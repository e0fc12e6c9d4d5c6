#!/usr/bin/env bash
# CI step of scripts/test.sh: the README's main command (scripts/bench.sh) as a new user runs
# it, in a fresh `git clone` of this checkout (its committed state) in a temporary folder, on
# the CPU backend with a short size range. Checks that it builds from nothing, says what it
# does, and writes the JSON and PNG that bench/table.py and bench/plot.py then accept; then that
# a second run after an edit reuses the build (compiles the edited file alone).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/actorcc-fresh-clone-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "== README main command in a fresh clone ($work): bash scripts/bench.sh -e 16K"
git clone -q "$src" "$work/actorcc"
cd "$work/actorcc"
# the CPU backend whatever machine CI runs on (GPUS=0); bounded like every CI step
GPUS=0 timeout 1200 bash scripts/bench.sh -e 16K -n 5 -w 2 2>&1 | tee "$work/bench.out"
fail() { echo "FAILED (fresh-clone bench): $*" >&2; exit 1; }
grep -q '^== building actorcc-bench' "$work/bench.out" || fail "no progress line for the build"
grep -q 'compiling src/' "$work/bench.out" || fail "no per-file build progress"
grep -q '^== done: ' "$work/bench.out" || fail "no closing line"
json=$(ls bench/results/local/*.json 2>/dev/null | head -1)
[ -n "$json" ] || fail "no JSON under bench/results/local/"
[ -f "${json%.json}.png" ] || fail "no PNG next to $json"
python3 bench/table.py bench/results/local | tee "$work/table.out"
grep -q '| 16 K |' "$work/table.out" || fail "bench/table.py shows no 16 K row for bench/results/local"
python3 bench/plot.py "$json" -o "$work/again.png" -q && [ -s "$work/again.png" ] || fail "bench/plot.py failed on $json"
# The second command reuses the build folder (scripts/build_folder.sh): after an edit of one source
# file it compiles that file alone, not everything again (one compile and a one-size sweep).
touch src/common/log.cpp
echo "== second command after editing src/common/log.cpp: bash scripts/bench.sh -b 1K -e 1K"
GPUS=0 timeout 600 bash scripts/bench.sh -b 1K -e 1K -n 2 -w 1 2>&1 | tee "$work/bench2.out"
grep -q 'reusing the build there' "$work/bench2.out" || fail "the second run did not reuse the build folder"
compiled=$(grep -c 'compiling ' "$work/bench2.out" || true)
[ "$compiled" = 1 ] || fail "the second run compiled $compiled files (want 1: the edited one)"
echo "== fresh clone: bench.sh, table.py and plot.py passed; the second run compiled 1 file"
