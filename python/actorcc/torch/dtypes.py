"""The torch dtypes the "actorcc" torch backend takes (actorcc.torch), and how it hands each to
actorcc: the set torch's NCCL backend takes, with the same semantics, so a model moving from
"nccl" to "actorcc" meets neither a new refusal nor another result (docs/torch.md, dtypes).

- actorcc's own types (float32, float16, bfloat16, float64, int8, uint8, int32, int64) go as
  they are.
- bool and the 1-byte float8 / float4 types go as uint8, as NCCL's backend sends them
  (ncclUint8): the collectives that move bytes move them unchanged. A bool reduction follows
  NCCL's backend: SUM is MAX (logical or; a uint8 sum could wrap to 0), and PRODUCT is MIN
  (logical and, for any nonzero bytes, where a uint8 product of them could wrap); MIN and MAX
  stay; AVG is refused.
- float8_e4m3fn and float8_e5m2 reduce (as NCCL's backend does with NCCL 2.24 on) through a
  float32 copy, the result rounded back once: actorcc has no float8 arithmetic. The other
  float8 / float4 types refuse reductions, as NCCL's backend does.
- complex tensors go as their real view (torch.view_as_real), as torch.distributed hands
  them to NCCL: SUM and AVG reduce them; the other ops are refused (they would compare or
  multiply real and imaginary parts separately).
- Anything else (int16, uint16/32/64, the sub-byte ints, float8_e8m0fnu) is refused, as NCCL's
  backend refuses it: with a TypeError, which is also actorcc's InvalidArgumentError (refused
  through the group: the other ranks' calls raise at once, naming this rank).
"""
from __future__ import annotations

import torch

from .. import _tensors as T
from .._actorcc import InvalidArgumentError


class DtypeError(InvalidArgumentError, TypeError):
    """A dtype, or a reduce op on it, that the backend refuses: TypeError where NCCL's backend
    raises one, InvalidArgumentError as every refused argument of actorcc."""


_NATIVE = frozenset(getattr(torch, name) for name in T.DTYPE_CODES)
_BYTES = frozenset(getattr(torch, name) for name in (
    "bool", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float4_e2m1fn_x2")
    if hasattr(torch, name))
_FLOAT8_REDUCED = frozenset(getattr(torch, name) for name in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, name))
_COMPLEX = frozenset(getattr(torch, name) for name in ("complex32", "complex64", "complex128") if hasattr(torch, name))
_COMPLEX_OPS = ("sum", "avg")
_BOOL_OPS = {"sum": "max", "prod": "min", "min": "min", "max": "max"}

SUPPORTED = tuple(str(d).rpartition(".")[2] for d in sorted(_NATIVE | _BYTES | _COMPLEX, key=str))


def error(message, rank):
    e = DtypeError(f"actorcc torch backend: rank {rank}: {message}")
    e.code = "invalid argument"
    e.rank = e.observer_rank = rank
    return e


def wire(t, rank):
    """(t as actorcc's communicator takes it: t itself or a view of its memory, None) for a
    dtype the backend takes, else (None, the DtypeError to refuse the call with)."""
    d = t.dtype
    if d in _NATIVE:
        return t, None
    if d in _BYTES:
        return t.view(torch.uint8), None
    if d in _COMPLEX:
        return torch.view_as_real(t), None
    return None, error(f"input tensor data type {d} is not supported (as on torch's NCCL backend; supported: "
                       f"{', '.join(SUPPORTED)})", rank)


def reduce_op(dtype, op, what, rank):
    """(actorcc's reduce op for reducing `dtype` tensors with actorcc op `op`, None), or
    (None, the DtypeError to refuse the call with); `what`: the call, for the message."""
    if dtype == torch.bool:
        ours = _BOOL_OPS.get(op)
        if ours is None:
            return None, error(f"{what}: cannot use ReduceOp.{op.upper()} with boolean inputs (as on torch's NCCL "
                               f"backend; SUM is logical or, PRODUCT logical and, MIN, MAX)", rank)
        return ours, None
    if dtype in _COMPLEX and op not in _COMPLEX_OPS:
        name = {"prod": "PRODUCT"}.get(op, op.upper())
        return None, error(f"{what} does not support ReduceOp.{name} on complex tensors (SUM, AVG)", rank)
    if dtype in _BYTES and dtype not in _FLOAT8_REDUCED:
        return None, error(f"{what}: unsupported type {dtype} for a reduction (as on torch's NCCL backend; "
                           f"float8_e4m3fn and float8_e5m2 reduce)", rank)
    return op, None


def reducible(w, dtype):
    """The buffer a reduction of `w` (a wire view of a `dtype` tensor) runs on: w itself, or a
    float32 copy of a float8 tensor's values (actorcc has no float8 arithmetic); settle() then
    rounds the result back into the tensor."""
    if dtype in _FLOAT8_REDUCED:
        return w.view(dtype).float()
    return w


def settle(w, r, dtype):
    """Rounds reduction result `r` (from reducible(w, dtype)) back into `w`'s memory."""
    if r is not w:
        w.view(dtype).copy_(r)
