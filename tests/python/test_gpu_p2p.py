"""GPU tier (device machine only; skipped without torch + CUDA): all_to_all, gather, scatter,
reduce, send/recv, batches and all_to_all_v on the NVLink path with ranks sharing one GPU
(ACTORCC_CUDA_SHARE_GPU=1, which the 1-GPU machine needs) and, with 2 GPUs, one rank per GPU;
the same on the NCCL path (two virtual nodes, 2 GPUs); transfers whose ends disagree."""
import random

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import gpu_p2p_workers  # noqa: E402
from mp_helpers import expect_no_failures, run_ranks  # noqa: E402

NGPU = torch.cuda.device_count()
pytestmark = pytest.mark.gpu
SHARED = {"CUDA_VISIBLE_DEVICES": "0", "ACTORCC_CUDA_SHARE_GPU": "1"}


@pytest.mark.parametrize("world", [2, 3])
def test_nvlink_path_sharing_one_gpu(world, uid):
    seed = random.getrandbits(32)
    res = run_ranks(world, gpu_p2p_workers.gpu_p2p, uid, seed, gpu_p2p_workers.SHARED_SIZES, timeout=900,
                    env=SHARED)
    expect_no_failures(res, f" (seed {seed})")


@pytest.mark.skipif(NGPU < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize("permuted", [False, True])
def test_nvlink_path_one_gpu_each(permuted, uid):
    seed = random.getrandbits(32)
    order = [1, 0] if permuted else [0, 1]
    res = run_ranks(2, gpu_p2p_workers.gpu_p2p, uid, seed, timeout=600,
                    env=lambda r: {"CUDA_VISIBLE_DEVICES": str(order[r])})
    expect_no_failures(res, f" (seed {seed})")


@pytest.mark.skipif(NGPU < 2, reason="needs 2 GPUs (NCCL refuses two ranks on one GPU)")
def test_nccl_path_two_virtual_nodes(uid):
    seed = random.getrandbits(32)
    res = run_ranks(2, gpu_p2p_workers.gpu_p2p, uid, seed, timeout=600,
                    env=lambda r: {"CUDA_VISIBLE_DEVICES": str(r), "ACTORCC_NODE_ID": f"node{r}",
                                   "ACTORCC_MULTINODE": "flat"})
    expect_no_failures(res, f" (seed {seed})")


@pytest.mark.parametrize("what", ["count", "dtype"])
def test_nvlink_transfer_mismatch_fails_on_both_ends(what, uid):
    res = run_ranks(2, gpu_p2p_workers.gpu_p2p_mismatch, uid, what, timeout=120, env=SHARED)
    for r, (status, value) in enumerate(res):
        assert status == "ok", f"rank {r}: {status} {value}"
        err = value[0]
        assert err is not None, f"rank {r}: a {what} mismatch passed silently"
        assert "rank 0" in err and "rank 1" in err, f"rank {r}: the error names not both ranks: {err}"
    assert res[1][1][1], "rank 1's buffer was written although the transfer disagreed"
