"""Tensor plumbing for the Python layer: which framework a tensor comes from, the fast torch
descriptor, default CUDA streams, and allocation of outputs with the tensor's own framework.

Nothing here imports torch, cupy or jax: a framework is used only when the caller's tensor
comes from it (it is then already in sys.modules).
"""
from __future__ import annotations

import sys

from . import _actorcc
from ._actorcc import InvalidArgumentError

# Codes of actorcc::DataType, RedOp and Collective, as the extension exports them.
DTYPE_CODES = dict(_actorcc.DTYPE_CODES)
SUPPORTED_DTYPES = tuple(DTYPE_CODES)
OP_CODES = dict(_actorcc.OP_CODES)
OP_CODES.update({alias: OP_CODES[name] for alias, name in
                 {"product": "prod", "mean": "avg", "average": "avg"}.items()})
_COLL = _actorcc.COLLECTIVE_CODES
ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, BARRIER = (
    _COLL["all_reduce"], _COLL["reduce_scatter"], _COLL["all_gather"], _COLL["broadcast"], _COLL["barrier"])
SEND, RECV, SEND_RECV, ALL_TO_ALL, ALL_TO_ALL_V, REDUCE, GATHER, SCATTER = (
    _COLL["send"], _COLL["recv"], _COLL["send_recv"], _COLL["all_to_all"], _COLL["all_to_all_v"],
    _COLL["reduce"], _COLL["gather"], _COLL["scatter"])

# DLPack device types (dlpack.h).
DEV_CPU, DEV_CUDA, DEV_CUDA_HOST = 1, 2, 3

_torch = None          # the torch module, once a torch tensor has been seen
_torch_tensor = None   # torch.Tensor
_torch_dtypes = {}     # torch.dtype -> DataType code
_torch_raw_stream = None
on_torch_found = []    # callbacks run once torch has been found


def invalid(message, rank=-1):
    """An InvalidArgumentError shaped like the ones the extension raises."""
    e = InvalidArgumentError(f"actorcc invalid argument error: rank {rank}: {message}" if rank >= 0
                             else f"actorcc invalid argument error: {message}")
    e.code = "invalid argument"
    e.rank = rank
    e.observer_rank = rank
    return e


def parse_op(op, rank=-1):
    """'sum' | 'prod' | 'min' | 'max' | 'avg', or an enum from torch.distributed / ray
    (ReduceOp.SUM, ...), to the actorcc::RedOp code."""
    if isinstance(op, str):
        code = OP_CODES.get(op.lower())
    else:
        name = getattr(op, "name", None) or str(op).rsplit(".", 1)[-1]
        code = OP_CODES.get(str(name).lower())
    if code is None:
        raise invalid(f"unsupported reduction op {op!r} (sum, prod, min, max, avg)", rank)
    return code


def _find_torch():
    global _torch, _torch_tensor, _torch_raw_stream
    t = sys.modules.get("torch")
    if t is None or not hasattr(t, "Tensor"):
        return None
    _torch, _torch_tensor = t, t.Tensor
    # actorcc's dtype names are torch's.
    _torch_dtypes.update({getattr(t, name): code for name, code in DTYPE_CODES.items()})
    _torch_raw_stream = getattr(t._C, "_cuda_getCurrentRawStream", None)
    for fn in on_torch_found:
        fn()
    return t


def is_torch(x):
    if _torch_tensor is None and _find_torch() is None:
        return False
    return isinstance(x, _torch_tensor)


def torch_desc(t, what, rank):
    """(ptr, count, dtype, device_type, device_id) for a torch tensor: the extension's fast
    path, cheaper than DLPack and fine for tensors that require grad (DLPack export refuses
    those, though broadcasting parameters is a main use)."""
    code = _torch_dtypes.get(t.dtype)
    if code is None:
        raise invalid(f"{what} has unsupported dtype {t.dtype} (supported: {', '.join(SUPPORTED_DTYPES)})", rank)
    if not t.is_contiguous():
        raise invalid(f"{what} is not contiguous; pass a contiguous tensor (e.g. .contiguous())", rank)
    if t.is_cuda:
        return (t.data_ptr(), t.numel(), code, DEV_CUDA, t.get_device())
    if t.device.type != "cpu":
        raise invalid(f"{what} is on unsupported device {t.device}", rank)
    return (t.data_ptr(), t.numel(), code, DEV_CPU, 0)


def module_root(x):
    return type(x).__module__.split(".", 1)[0]


def numpy_bf16_view(x):
    """A numpy array of ml_dtypes.bfloat16 (which DLPack cannot describe) as a uint16 view, or
    None for anything else."""
    dt = getattr(x, "dtype", None)
    if dt is not None and getattr(dt, "name", "") == "bfloat16" and module_root(x) == "numpy":
        return x.view("uint16")
    return None


def is_cuda_tensor(x):
    if is_torch(x):
        return x.is_cuda
    dev = getattr(x, "__dlpack_device__", None)
    if dev is None:
        return False
    try:
        return dev()[0] == DEV_CUDA
    except Exception:
        return False


def current_stream(x):
    """The stream a CUDA tensor's framework considers current (0 = legacy default stream)."""
    if is_torch(x):
        if not x.is_cuda:
            return 0
        if _torch_raw_stream is not None:
            return _torch_raw_stream(x.get_device())
        return _torch.cuda.current_stream(x.device).cuda_stream
    root = module_root(x)
    if root == "cupy":
        import cupy
        return cupy.cuda.get_current_stream().ptr
    return 0


def stream_handle(stream, rank=-1):
    """An explicit stream argument: an int (cudaStream_t) or a framework stream object
    (torch.cuda.Stream .cuda_stream, cupy Stream .ptr, CUDA Python's __cuda_stream__)."""
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        return int(proto()[1])
    raise invalid(f"stream must be an int (cudaStream_t) or a torch/cupy stream, got {type(stream).__name__}", rank)


def shape_of(x):
    s = getattr(x, "shape", None)
    return tuple(int(d) for d in s) if s is not None else None


def empty(like, shape):
    """A new uninitialised tensor of `shape` with like's framework, dtype and device."""
    if is_torch(like):
        return _torch.empty(shape, dtype=like.dtype, device=like.device)
    root = module_root(like)
    if root == "numpy":
        import numpy
        return numpy.empty(shape, dtype=like.dtype)
    if root == "cupy":
        import cupy
        with cupy.cuda.Device(like.device.id):
            return cupy.empty(shape, dtype=like.dtype)
    if root in ("jax", "jaxlib"):
        raise invalid("jax arrays are immutable: pass out= a mutable tensor (torch, cupy, numpy)")
    raise invalid(f"cannot allocate an output like a {type(like).__module__}.{type(like).__name__}: pass out=")


def check_mutable(x, what):
    if module_root(x) in ("jax", "jaxlib"):
        raise invalid(f"{what} is a jax array, which is immutable: pass out= a mutable tensor (torch, cupy, numpy)")


def nbytes(x):
    """(ptr, nbytes) of a tensor, for register_buffer."""
    if is_torch(x):
        return x.data_ptr(), x.numel() * x.element_size()
    iface = getattr(x, "__cuda_array_interface__", None) or getattr(x, "__array_interface__", None)
    if iface is not None:
        return int(iface["data"][0]), int(x.nbytes)
    raise invalid(f"register_buffer: cannot get the address of a {type(x).__name__}; pass (ptr, nbytes)")

