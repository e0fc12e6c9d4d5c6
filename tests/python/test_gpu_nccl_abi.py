"""torch's "nccl" backend, CuPy and a vLLM-style ctypes client on actorcc's libnccl.so.2 (device
machine only: needs CUDA and the library, ACTORCC_NCCL_ABI_LIB=<build>/nccl/libnccl.so.2; the
cases are tests/python/nccl_abi_workers.py's, which scripts/device.sh's ncclabi and
ncclclients phases run one by one with their own caps)."""
import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if not os.path.isfile(os.environ.get("ACTORCC_NCCL_ABI_LIB", "")):
    pytest.skip("ACTORCC_NCCL_ABI_LIB does not name the built library", allow_module_level=True)

import nccl_abi_workers  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case,world,mode", [
    ("matrix", 2, "preload"), ("matrix", 3, "preload"), ("matrix", 4, "preload"), ("train", 2, "preload"),
    ("train", 4, "preload"), ("groups", 3, "preload"), ("fresh", 4, "preload"), ("fresh", 2, "audit"),
    ("kill", 3, "preload"), ("killwd", 3, "preload"), ("stall", 2, "preload"), ("ctypes", 2, "preload"),
    ("cupy", 2, "preload")])
def test_case(case, world, mode, tmp_path):
    if case == "cupy":
        pytest.importorskip("cupy")
    ok, text = nccl_abi_workers.launch(case, world, 240, str(tmp_path), mode=mode)
    assert ok, text
