#!/usr/bin/env bash
# The library's ABI surface: SONAME libnccl.so.2; it defines every function each committed import
# list needs (torch, CuPy, vLLM, nccl-tests); it leaves no nccl* symbol undefined (it never
# resolves NCCL's API anywhere else); and it exports nothing but nccl* and pnccl*.
set -u
lib=$1 imports=$2
fail=0
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libnccl.so.2 ] || { echo "FAIL: SONAME is '$soname', not libnccl.so.2"; fail=1; }
defined=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
for list in "$imports"/*.txt; do
  missing=$(comm -23 <(grep -v '^\s*$' "$list" | sort -u) <(echo "$defined"))
  if [ -n "$missing" ]; then echo "FAIL: $(basename "$list") needs what the library lacks:" $missing; fail=1; fi
  # NCCL exports a pncclX profiling alias beside every ncclX.
  for f in $(grep -v '^\s*$' "$list"); do
    echo "$defined" | grep -qx "p$f" || { echo "FAIL: no p$f alias"; fail=1; }
  done
done
undef=$(nm -D --undefined-only "$lib" | awk '{print $2}' | grep -E '^p?nccl' || true)
[ -z "$undef" ] || { echo "FAIL: undefined NCCL symbols:" $undef; fail=1; }
extra=$(echo "$defined" | grep -vE '^p?nccl' || true)
[ -z "$extra" ] || { echo "FAIL: exports beyond nccl*/pnccl*:" $extra; fail=1; }
echo "exports: $(echo "$defined" | wc -l) symbols ($(echo "$defined" | grep -c '^nccl') nccl*)"
[ $fail = 0 ] && echo PASS
exit $fail
