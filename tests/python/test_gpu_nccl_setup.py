"""GPU tier (device machine only): the NCCL path's setup never hangs. NCCL refuses two ranks
on one GPU only on those two ranks; before NCCL's setup was bounded, the third rank then
waited in ncclCommInitRank forever (measured: 3 ranks on 2 GPUs hung there). A rank without
NCCL once threw before the id exchange alone, and the other waited in NCCL's setup."""
import time

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import gpu_workers  # noqa: E402
from mp_helpers import run_ranks  # noqa: E402

NGPU = torch.cuda.device_count()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(NGPU < 2, reason="needs 2 GPUs")]


def test_failed_nccl_setup_ends_every_rank(uid):
    # actorcc sees two nodes (ACTORCC_NODE_ID) and is asked for one flat NCCL communicator
    # across them (ACTORCC_MULTINODE=flat: the path under test), so the group takes the NCCL
    # backend; NCCL sees one host (no NCCL_HOSTID), where ranks 0 and 2 share GPU 0.
    devices, nodes = ["0", "1", "0"], ["a", "b", "a"]
    t0 = time.monotonic()
    res = run_ranks(3, gpu_workers.join_and_all_reduce, uid, timeout=120, expect_errors=True,
                    env=lambda r: {"CUDA_VISIBLE_DEVICES": devices[r], "ACTORCC_NODE_ID": nodes[r],
                                   "NCCL_NVLS_ENABLE": "0", "ACTORCC_MULTINODE": "flat"})
    took = time.monotonic() - t0
    kinds = [k for k, _ in res]
    assert "timeout" not in kinds and "died" not in kinds, f"a rank hung or died: {res}"
    assert kinds == ["err"] * 3, f"every rank must fail the group's creation: {res}"
    # Each error names NCCL's setup; the rank that did not share a GPU learns it from a sharer's
    # abort (RemoteError naming rank 0 or 2), within seconds, not the 60 s join bound.
    for r, (_, info) in enumerate(res):
        assert "NCCL" in info["msg"], f"rank {r}: {info['msg']}"
    assert "RemoteError" in res[1][1]["mro"] and res[1][1]["msg"].count("rank") >= 2, res[1][1]
    assert took < 50, f"{took:.1f} s: the ranks waited for a deadline instead of the abort"


def test_nccl_missing_on_one_rank(uid):
    # One rank cannot load NCCL. It must not skip the exchange of NCCL's id alone: the other
    # rank would take its failure report for the id and wait in NCCL's setup.
    t0 = time.monotonic()
    res = run_ranks(2, gpu_workers.join_and_all_reduce, uid, timeout=120, expect_errors=True,
                    env=lambda r: {"CUDA_VISIBLE_DEVICES": str(r), "ACTORCC_NODE_ID": f"n{r}",
                                   "NCCL_HOSTID": f"n{r}", "NCCL_NVLS_ENABLE": "0", "ACTORCC_MULTINODE": "flat",
                                   **({"ACTORCC_NCCL_LIB": "/nonexistent/libnccl.so.2"} if r == 1 else {})})
    took = time.monotonic() - t0
    assert [k for k, _ in res] == ["err", "err"], f"both ranks must fail the group's creation: {res}"
    for r, (_, info) in enumerate(res):
        assert "rank 1" in info["msg"] and "/nonexistent/libnccl.so.2" in info["msg"], f"rank {r}: {info['msg']}"
    assert took < 50, f"{took:.1f} s: a rank waited for a deadline"


def test_nccl_backend_between_virtual_nodes(uid):
    # The positive case of the same path: two virtual nodes on distinct GPUs (NCCL sees two hosts
    # too), the bounded setup on its helper thread, then NCCL carrying the collective.
    res = run_ranks(2, gpu_workers.join_and_all_reduce, uid, timeout=180,
                    env=lambda r: {"CUDA_VISIBLE_DEVICES": str(r), "ACTORCC_NODE_ID": f"n{r}",
                                   "NCCL_HOSTID": f"n{r}", "NCCL_NVLS_ENABLE": "0", "ACTORCC_MULTINODE": "flat"})
    for r, (_, (backend, first, _took)) in enumerate(res):
        assert backend == "cuda" and first == 3.0, f"rank {r}: backend {backend}, all_reduce gave {first}"
