"""The build's CUDA switch (CMakeLists.txt): ACTORCC_CUDA=OFF in the environment skips the CUDA
backend (so `ACTORCC_CUDA=OFF pip install .` does), and a machine with nvcc but no NVIDIA driver
is told at configure time that the CUDA backend is being built and how to skip it."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("cmake") is None or not (ROOT / "CMakeLists.txt").exists(),
                                reason="needs cmake and the source tree")


def _configure(tmp_path, **env):
    e = dict(os.environ)
    e.pop("ACTORCC_CUDA", None)
    e.update(env)
    p = subprocess.run(["cmake", "-S", str(ROOT), "-B", str(tmp_path / "b"), "-DACTORCC_TESTS=OFF", "-DACTORCC_TOOLS=OFF",
                        "-DACTORCC_PYTHON=OFF"], env=e, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    cache = (tmp_path / "b" / "CMakeCache.txt").read_text()
    return p.stdout + p.stderr, "ACTORCC_CUDA:BOOL=ON" in cache


def test_environment_switch_skips_the_cuda_backend(tmp_path):
    out, cuda = _configure(tmp_path, ACTORCC_CUDA="OFF")
    assert not cuda and "building the CUDA backend" not in out, out


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"), reason="no nvcc")
def test_nvcc_without_a_driver_says_how_to_skip(tmp_path):
    out, cuda = _configure(tmp_path)
    assert cuda, out
    if os.path.exists("/proc/driver/nvidia/version"):
        assert "actorcc: building the CUDA backend" in out and "ACTORCC_CUDA=OFF skips it" in out, out
    else:
        assert "no NVIDIA driver" in out and "ACTORCC_CUDA=OFF pip install -v ." in out, out
