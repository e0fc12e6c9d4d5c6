#!/usr/bin/env bash
# Python packages the CI (and a developer) needs to build actorcc's wheel and run
# tests/python. Called by scripts/test.sh before `pip install .`. Idempotent: installs only
# what is missing, and names it before installing it.
#
# Sizes measured when this was written (Python 3.11, x86_64): ray 2.60 wheel 79 MB (240 MB
# installed, ~15 s to install with its deps); the rest is a few MB (matplotlib ~10 MB: the
# plot tests and the fresh-clone bench step draw PNGs). torch (for the torch.distributed
# backend's CPU tests): PyPI's wheel pulls the CUDA stack, 5.3 GB installed, measured 2 min 6 s
# for `pip install torch` (torch 2.15) in a fresh venv on the CI machine.
# ACTORCC_CI_TORCH=0 leaves it out (those tests then skip).
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
if [ "${ACTORCC_CI_TORCH:-1}" = 1 ] && ! "$PY" -c "import torch" 2>/dev/null; then
  echo "== installing with pip: torch (~5.3 GB installed with its CUDA stack, ~2 min; ACTORCC_CI_TORCH=0 skips it)"
  timeout 900 "$PY" -m pip install --disable-pip-version-check -q torch || echo "torch did not install: its tests skip"
fi
"$PY" -c "import nanobind, scikit_build_core, numpy, pytest, ml_dtypes, matplotlib, ray; print('python deps ok: ray', ray.__version__)"
