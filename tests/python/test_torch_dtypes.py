"""The "actorcc" torch backend takes the dtypes torch's NCCL backend takes, with its semantics
(docs/torch.md, dtypes): bool (reductions as logical or / and), the float8 types (moved bit for
bit; e4m3fn and e5m2 reduced), complex (as its real view: SUM and AVG); and refuses the rest as
NCCL's backend does, with a TypeError naming the dtype, on every rank. 3 spawned ranks on CPU
tensors. Skipped where torch is not installed."""
import pytest

torch = pytest.importorskip("torch")

import torch_dtype_workers as W  # noqa: E402
from conftest import free_port  # noqa: E402
from mp_helpers import expect_no_failures, run_ranks  # noqa: E402


def test_bool_on_every_collective_against_numpy():
    expect_no_failures(run_ranks(3, W.bool_collectives, free_port(), timeout=120))


# (dtype, whether NCCL's backend reduces it): the float8 types without NCCL's FP8 arithmetic
# (e4m3fnuz, e5m2fnuz) only move.
NEW_DTYPES = [("float8_e4m3fn", True), ("float8_e5m2", True), ("float8_e4m3fnuz", False),
              ("float8_e5m2fnuz", False), ("complex64", True), ("complex128", True), ("complex32", True)]


def test_newly_accepted_dtypes():
    # One group for all of them: each launch of 3 ranks importing torch costs seconds.
    cases = [p for p in NEW_DTYPES if hasattr(torch, p[0])]
    assert len(cases) >= 5, cases
    expect_no_failures(run_ranks(3, W.dtype_collectives, free_port(), cases, timeout=180))


# (dtype, call, op, what the message says): each refused on every rank, as NCCL's backend refuses it.
REFUSALS = [
    ("int16", "all_gather", "SUM", "data type torch.int16 is not supported"),
    ("uint32", "all_reduce", "SUM", "data type torch.uint32 is not supported"),
    ("bool", "all_reduce", "AVG", "cannot use ReduceOp.AVG with boolean inputs"),
    ("complex64", "reduce", "MAX", "reduce does not support ReduceOp.MAX on complex tensors"),
    ("float8_e4m3fnuz", "all_reduce", "SUM", "unsupported type torch.float8_e4m3fnuz for a reduction"),
]


def test_refused_as_on_nccl():
    cases = [r for r in REFUSALS if hasattr(torch, r[0])]
    ports = set()
    while len(ports) < len(cases):  # one group per case: a refusal aborts its group
        ports.add(free_port())
    res = run_ranks(2, W.refused, sorted(ports), [c[:3] for c in cases], timeout=120)
    for rank, (kind, got) in enumerate(res):
        assert kind == "ok", (rank, kind, got)
        for (name, call, op, text), info in zip(cases, got):
            assert info is not None, (rank, name, call, op, "not refused")
            assert "TypeError" in info["mro"] and "InvalidArgumentError" in info["mro"], (rank, name, info)
            assert text in info["msg"] and f"rank {rank}" in info["msg"], (rank, name, info["msg"])


def test_one_rank_refusing_a_dtype_fails_every_rank_naming_it():
    res = run_ranks(3, W.one_rank_refuses, free_port(), timeout=60, expect_errors=True)
    for rank, (kind, info) in enumerate(res):
        assert kind == "err", (rank, kind, info)
        if rank == 1:
            assert "TypeError" in info["mro"] and "torch.uint16 is not supported" in info["msg"], info["msg"]
        else:
            assert info["type"] == "RemoteError" and info["culprit"] == 1, (rank, info)
            assert "rank 1" in info["msg"] and "torch.uint16" in info["msg"], (rank, info["msg"])
        assert float(info["msg"].rpartition("[after ")[2].split(" s]")[0]) < 10, (rank, info["msg"])
