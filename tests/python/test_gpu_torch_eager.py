"""GPU tier (device machine only; skipped without torch + CUDA): test_torch_eager.py's eager forming on CUDA tensors.
init_process_group("actorcc", device_id=cuda:0) forms the CUDA communicator there, as torch's NCCL
backend does given a device_id, and new_group inherits the device; without device_id the first
call forms it. 2 ranks sharing GPU 0 (ACTORCC_CUDA_SHARE_GPU=1)."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import torch_eager_workers as W  # noqa: E402
from conftest import NO_GROUP_PASSED, free_port, torch_passes_its_group  # noqa: E402
from mp_helpers import expect_no_failures, run_ranks  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch_passes_its_group(torch), reason=NO_GROUP_PASSED)]


@pytest.mark.parametrize("device_id", [True, False])
def test_device_id_forms_the_cuda_communicator_at_init(device_id):
    expect_no_failures(run_ranks(2, W.formed_on_gpu, free_port(), device_id, timeout=240,
                                 env={"ACTORCC_CUDA_SHARE_GPU": "1"}))
