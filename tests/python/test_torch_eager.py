"""The first torch.distributed call on backend "actorcc" formed the group's
communicator (every rank's join), so at 16 ranks on CPU it took 233-425 ms against gloo's 55-95
ms. Where the group's device is known when it is created (init_process_group's device_id, or a
process without CUDA, whose tensors can only be CPU ones), init_process_group and new_group form
it, as torch's NCCL backend does given a device_id, and the first call forms nothing; a
"cpu:gloo,cuda:actorcc" group gives its CPU tensors to gloo and forms no CPU communicator, and
where the device is unknown the first call still forms it. Skipped where torch is not installed."""
import pytest

torch = pytest.importorskip("torch")

import torch_eager_workers as W  # noqa: E402
from conftest import NO_GROUP_PASSED, free_port, torch_passes_its_group  # noqa: E402
from mp_helpers import expect_no_failures, run_ranks  # noqa: E402

pytestmark = [pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU case: a process without CUDA"),
              pytest.mark.skipif(not torch_passes_its_group(torch), reason=NO_GROUP_PASSED)]


@pytest.mark.parametrize("backend,device_id,lazy", [
    ("actorcc", False, False),
    ("actorcc", True, False),
    ("cpu:gloo,cuda:actorcc", False, False),
    ("actorcc", False, True),
])
def test_the_group_forms_its_communicator_at_creation(backend, device_id, lazy):
    expect_no_failures(run_ranks(3, W.formed_at_creation, free_port(), backend, device_id, lazy, timeout=120))
