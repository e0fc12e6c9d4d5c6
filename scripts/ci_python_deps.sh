#!/usr/bin/env bash
# Python packages the CI (and a developer) needs to build actorcc's wheel and run
# tests/python. Called by .ci/run before `pip install .`. Idempotent.
#
# Sizes measured when this was written (Python 3.11, x86_64): ray 2.60 wheel 79 MB (240 MB
# installed, ~15 s to install with its deps); the rest is a few MB. torch (for the
# torch.distributed backend's CPU tests): PyPI's wheel pulls the CUDA stack, 5.3 GB installed,
# measured 2 min 6 s for `pip install torch` (torch 2.15) in a fresh venv on the CI machine.
# ACTORCC_CI_TORCH=0 leaves it out (those tests then skip).
set -euo pipefail
PY=${PYTHON:-python3}
"$PY" -m pip install --disable-pip-version-check -q \
  "scikit-build-core>=0.10" "nanobind>=2.0" \
  numpy pytest ml_dtypes \
  ray
if [ "${ACTORCC_CI_TORCH:-1}" = 1 ]; then
  timeout 900 "$PY" -m pip install --disable-pip-version-check -q torch || echo "torch did not install: its tests skip"
fi
"$PY" -c "import nanobind, scikit_build_core, numpy, pytest, ml_dtypes, ray; print('python deps ok: ray', ray.__version__)"
