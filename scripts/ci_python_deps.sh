#!/usr/bin/env bash
# Python packages the CI (and a developer) needs to build actorcc's wheel and run
# tests/python. Called by scripts/test.sh before `pip install .`. Idempotent: installs only
# what is missing, and names it before installing it.
#
# Sizes measured when this was written (Python 3.11, x86_64): ray 2.60 wheel 79 MB (240 MB
# installed, ~15 s to install with its deps); the rest is a few MB (matplotlib ~10 MB: the
# plot tests and the fresh-clone bench step draw PNGs). torch is deliberately
# absent: PyPI's torch wheel pulls the CUDA 13 stack (cudnn, cublas, nccl, ...: several GB),
# so the CPU tier tests numpy + a DLPack-only object, and the torch tests skip without it.
set -euo pipefail
PY=${PYTHON:-python3}
# pip requirement -> module it provides
reqs=("scikit-build-core>=0.10=scikit_build_core" "nanobind>=2.0=nanobind" "numpy=numpy" "pytest=pytest"
      "ml_dtypes=ml_dtypes" "matplotlib=matplotlib" "ray=ray")
missing=()
for r in "${reqs[@]}"; do
  "$PY" -c "import ${r##*=}" 2>/dev/null || missing+=("${r%=*}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing with pip: ${missing[*]} (ray alone is ~240 MB installed)"
  "$PY" -m pip install --disable-pip-version-check -q "${missing[@]}"
fi
"$PY" -c "import nanobind, scikit_build_core, numpy, pytest, ml_dtypes, matplotlib, ray; print('python deps ok: ray', ray.__version__)"
