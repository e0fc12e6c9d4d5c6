"""torch.distributed with backend "actorcc" (CPU tensors, 2-3 spawned ranks): the collective
matrix through torch's API with tcp://, env:// and a TCPStore, "cpu:gloo,cuda:actorcc" (CPU
tensors must reach gloo, never actorcc), and DDP and FSDP2 on a tiny model against a
single-process reference. Skipped where torch is not installed."""
import pytest

torch = pytest.importorskip("torch")

import torch_workers  # noqa: E402
from conftest import free_port  # noqa: E402
from mp_helpers import expect_no_failures, run_ranks  # noqa: E402


@pytest.mark.parametrize("world,method", [(2, None), (3, "env")])
def test_collective_matrix(world, method):
    expect_no_failures(run_ranks(world, torch_workers.collectives, free_port(), method, timeout=300))


def test_device_backend_string_with_a_tcp_store():
    expect_no_failures(run_ranks(2, torch_workers.collectives, free_port(), "store", "cpu:gloo,cuda:actorcc", timeout=300))


TORCH = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])


@pytest.mark.parametrize("with_hook", [False, True])
def test_ddp_matches_single_process(with_hook):
    expect_no_failures(run_ranks(2, torch_workers.ddp, free_port(), 5, with_hook, timeout=300))


# FSDP2 itself cannot run on CPU tensors before torch 2.7, whatever the backend: 2.5 asserts
# "FSDP requires CUDA for streams", 2.6 calls Stream.record_event, which CPU streams lack.
@pytest.mark.skipif(TORCH < (2, 7), reason="torch < 2.7: FSDP2 does not run on CPU tensors (2.5: 'FSDP requires "
                                          "CUDA for streams'; 2.6: CPU streams have no record_event)")
def test_fsdp2_matches_single_process():
    expect_no_failures(run_ranks(2, torch_workers.fsdp2, free_port(), 4, timeout=300))


def test_registering_twice_is_harmless():
    import importlib

    import torch.distributed as dist

    import actorcc.torch
    importlib.reload(actorcc.torch)
    assert actorcc.torch.register() == "actorcc"
    assert dist.Backend("actorcc") == "actorcc"
