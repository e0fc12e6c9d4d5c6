"""GPU tier (device machine only; skipped without torch + CUDA): torch.distributed calls on
backend "actorcc" captured with torch.cuda.graph and replayed 1000 times with fresh inputs,
every replay's output checked against a float64 reference: all_reduce (blocking, and async_op
issued on a forked stream and waited on from the capturing one), all_gather_into_tensor,
reduce_scatter_tensor, broadcast and a batch_isend_irecv ring. Two ranks share GPU 0
(ACTORCC_CUDA_SHARE_GPU=1), so one GPU is enough."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import torch_graph_workers  # noqa: E402
from conftest import free_port  # noqa: E402
from mp_helpers import expect_no_failures, run_ranks  # noqa: E402

pytestmark = pytest.mark.gpu

REPLAYS = 1000


def test_captured_calls_replay_exactly_sharing_one_gpu():
    expect_no_failures(run_ranks(2, torch_graph_workers.graphs, free_port(), REPLAYS, timeout=300,
                                 env={"ACTORCC_CUDA_SHARE_GPU": "1", "LOCAL_DEVICE": "0"}))
