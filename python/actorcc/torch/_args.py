"""What the process group's calls read from torch's arguments: whether torch waits on the call
at once, a tensor's flat view, the first tensor of a nested argument."""
from __future__ import annotations

import torch


def _blocking(opts):
    """Whether torch waits on this call's Work at once (dist.* without async_op: torch 2.7 and
    later say so in opts.asyncOp; before, every call counts as asynchronous)."""
    return opts is not None and getattr(opts, "asyncOp", True) is False


def _flat(t):
    return t.reshape(-1)


def _first_tensor(x):
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (list, tuple)):
        for y in x:
            t = _first_tensor(y)
            if t is not None:
                return t
    return None
