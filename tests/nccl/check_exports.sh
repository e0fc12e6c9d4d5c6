#!/usr/bin/env bash
# The library's ABI surface: SONAME libnccl.so.2; it defines every function each committed import
# list needs (torch, CuPy, vLLM, nccl4py, JAX, nccl-tests); it leaves no nccl* symbol undefined (it
# never resolves NCCL's API anywhere else); it exports nothing but nccl* and pnccl*; and every
# function the library refuses (a `refuse(..., "ncclX"...)` in its sources) has a row marked
# **refused** in docs/nccl.md, so a client's call that refuses is one the documentation explains.
# usage: check_exports.sh LIB IMPORTS_DIR [SRC_DIR DOC]
set -u
lib=$1 imports=$2 src=${3:-} doc=${4:-}
fail=0
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libnccl.so.2 ] || { echo "FAIL: SONAME is '$soname', not libnccl.so.2"; fail=1; }
defined=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
refused=
if [ -n "$src" ]; then
  refused=$(grep -ohE 'refuse\([^"]*"nccl[A-Za-z0-9]+"' "$src"/*.cpp | grep -oE 'nccl[A-Za-z0-9]+' | sort -u)
  # The names in the first column of the table rows whose status is **refused**.
  documented=$(awk -F'|' '$3 ~ /\*\*refused\*\*/ {print $2}' "$doc" | tr ',' '\n' | grep -oE 'nccl[A-Za-z0-9]+' | sort -u)
  undoc=$(comm -23 <(echo "$refused") <(echo "$documented"))
  [ -z "$undoc" ] || { echo "FAIL: refused but not marked **refused** in $(basename "$doc"):" $undoc; fail=1; }
fi
for list in "$imports"/*.txt; do
  missing=$(comm -23 <(grep -v '^\s*$' "$list" | sort -u) <(echo "$defined"))
  if [ -n "$missing" ]; then echo "FAIL: $(basename "$list") needs what the library lacks:" $missing; fail=1; fi
  # NCCL exports a pncclX profiling alias beside every ncclX.
  for f in $(grep -v '^\s*$' "$list"); do
    echo "$defined" | grep -qx "p$f" || { echo "FAIL: no p$f alias"; fail=1; }
  done
  if [ -n "$refused" ]; then
    r=$(comm -12 <(grep -v '^\s*$' "$list" | sort -u) <(echo "$refused"))
    echo "$(basename "$list" .txt): $(grep -cv '^\s*$' "$list") functions, refused (docs/nccl.md says why):" ${r:-none}
  fi
done
undef=$(nm -D --undefined-only "$lib" | awk '{print $2}' | grep -E '^p?nccl' || true)
[ -z "$undef" ] || { echo "FAIL: undefined NCCL symbols:" $undef; fail=1; }
extra=$(echo "$defined" | grep -vE '^p?nccl' || true)
[ -z "$extra" ] || { echo "FAIL: exports beyond nccl*/pnccl*:" $extra; fail=1; }
echo "exports: $(echo "$defined" | wc -l) symbols ($(echo "$defined" | grep -c '^nccl') nccl*)"
[ $fail = 0 ] && echo PASS
exit $fail
