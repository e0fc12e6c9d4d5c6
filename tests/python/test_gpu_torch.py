"""GPU tier (device machine only; skipped without torch + CUDA): torch CUDA tensors in
processes that each see one GPU (CUDA_VISIBLE_DEVICES masked, also permuted)."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import actorcc  # noqa: E402
import gpu_workers  # noqa: E402
from mp_helpers import run_ranks, values  # noqa: E402

NGPU = torch.cuda.device_count()
pytestmark = pytest.mark.gpu


def worlds():
    return sorted({w for w in (2, NGPU) if 2 <= w <= NGPU}) or [1]


@pytest.mark.parametrize("world", worlds())
@pytest.mark.parametrize("permuted", [False, True])
def test_torch_cuda_matrix(world, permuted, uid):
    order = list(range(NGPU))[::-1] if permuted else list(range(NGPU))
    res = run_ranks(world, gpu_workers.torch_matrix, uid, timeout=600,
                    env=lambda r: {"CUDA_VISIBLE_DEVICES": str(order[r % NGPU])})
    for r, fails in enumerate(values(res)):
        assert not fails, f"rank {r}: {fails}"


def test_two_groups_on_gpus(uid):
    world = min(NGPU, 4)
    uid_b = str(actorcc.UniqueId.create("127.0.0.1"))
    res = run_ranks(world, gpu_workers.two_groups, uid, uid_b, timeout=300,
                    env=lambda r: {"CUDA_VISIBLE_DEVICES": str(r % NGPU)})
    assert all(values(res))


@pytest.mark.skipif(NGPU < 2, reason="needs 2 GPUs")
def test_registered_torch_outputs(uid):
    res = run_ranks(2, gpu_workers.registered, uid, timeout=300,
                    env=lambda r: {"CUDA_VISIBLE_DEVICES": str(r)})
    for r, fails in enumerate(values(res)):
        assert not fails, f"rank {r}: {fails}"
